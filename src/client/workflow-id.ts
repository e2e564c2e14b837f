import { InvalidInputError } from '../contract/validation';

/** Temporal's default `limit.maxIDLength`: longer workflow ids are refused by the server. */
export const MAX_WORKFLOW_ID_LENGTH = 1000;

/** Refuses a workflow (or batch) id the server would reject, before anything starts. */
export function checkWorkflowId(id: string, what = 'the workflow id'): string {
  if (id.trim() === '') throw new InvalidInputError([{ path: what, message: 'must not be empty' }]);
  if (id.length > MAX_WORKFLOW_ID_LENGTH)
    throw new InvalidInputError([
      { path: what, message: `is ${id.length} characters; the limit is ${MAX_WORKFLOW_ID_LENGTH}` },
    ]);
  if (/[\u0000-\u001f]/.test(id))
    throw new InvalidInputError([{ path: what, message: 'must not contain control characters' }]);
  return id;
}
