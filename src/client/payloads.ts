import type { AgentResult, AgentTask } from '../contract/agent-task';
import { segmentName } from '../contract/location';
import pLimit from 'p-limit';
import { inlineOutputLimit, type PayloadRef } from '../contract/payload-ref';
import { InvalidInputError } from '../contract/validation';
import type { PayloadStore } from '../store';

/**
 * Largest workflow input the client starts, in bytes of JSON. Temporal refuses payloads over 2 MB ("Blob data size
 * exceeds limit"); the margin leaves room for encoding, encryption and the start request itself.
 */
export const MAX_WORKFLOW_INPUT_BYTES = 1_500_000;

function megabytes(bytes: number): string {
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

/**
 * Moves the prompts of large tasks to the payload store: each such task keeps its id, name and settings and carries a
 * `contentRef` and a short placeholder prompt. A run's inline prompts together stay under about 1 MB.
 */
export async function offloadLargePrompts<T extends AgentTask>(
  tasks: readonly T[],
  workflowId: string,
  store: PayloadStore,
): Promise<T[]> {
  const limit = inlineOutputLimit(tasks.length);
  return Promise.all(
    tasks.map(async (task) => {
      const bytes = Buffer.byteLength(task.prompt, 'utf8') + Buffer.byteLength(task.system ?? '', 'utf8');
      if (bytes <= limit || task.contentRef) return task;
      const contentRef = await store.put(
        `runs/${segmentName(workflowId)}/inputs/${segmentName(task.id)}`,
        JSON.stringify({ prompt: task.prompt, ...(task.system === undefined ? {} : { system: task.system }) }),
      );
      const { system: _system, ...rest } = task;
      return { ...rest, prompt: `[prompt in the payload store: ${bytes} bytes]`, contentRef } as T;
    }),
  );
}

/** Refuses, naming the sizes, an input Temporal would reject, before anything starts. */
export function checkInputSize(input: unknown, what: string): void {
  const bytes = Buffer.byteLength(JSON.stringify(input), 'utf8');
  if (bytes > MAX_WORKFLOW_INPUT_BYTES) {
    throw new InvalidInputError([
      {
        path: what,
        message: `is ${megabytes(bytes)} after moving large prompts to the payload store; the limit is ${megabytes(MAX_WORKFLOW_INPUT_BYTES)} (fewer tasks per run, or use a batch)`,
      },
    ]);
  }
}

/** Fills in every `output` that travelled as a reference, so a caller sees the full text. */
export async function resolveOutputs(results: readonly AgentResult[], store: PayloadStore): Promise<AgentResult[]> {
  // A bounded number of reads at once: a thousand large answers need not be a thousand open sockets.
  const limit = pLimit(16);
  return Promise.all(
    results.map((result) =>
      result.output === undefined && result.outputRef
        ? limit(async () => ({ ...result, output: await store.get(result.outputRef as PayloadRef) }))
        : result,
    ),
  );
}

/** `resolveOutputs` for any run result shape: `results`, and `synthesis` when there is one. */
export async function resolveRunResult<R>(result: R, store: PayloadStore): Promise<R> {
  const value = result as { results?: AgentResult[]; synthesis?: AgentResult };
  if (!Array.isArray(value.results)) return result;
  const results = await resolveOutputs(value.results, store);
  const synthesis = value.synthesis ? (await resolveOutputs([value.synthesis], store))[0] : undefined;
  return { ...result, results, ...(synthesis ? { synthesis } : {}) };
}
