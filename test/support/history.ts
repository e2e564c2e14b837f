import type { WorkflowHandle } from '@temporalio/client';

/** Activities the server still counts as pending for a run (none, once everything it started has stopped). */
export async function pendingActivities(workflow: WorkflowHandle): Promise<number> {
  const description = await workflow.describe();
  return description.raw.pendingActivities?.length ?? 0;
}

/** Decodes a JSON payload (as the default converter writes it) to its value. */
export function decodePayload(payload: { data?: Uint8Array | null } | null | undefined): unknown {
  if (!payload?.data) return undefined;
  return JSON.parse(Buffer.from(payload.data).toString('utf8'));
}
