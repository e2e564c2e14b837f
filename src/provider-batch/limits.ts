import type { BatchProvider } from '../contract/provider-batch';

/** The providers' documented limits on one batch. */
export const PROVIDER_LIMITS: Readonly<Record<BatchProvider, { requests: number; bytes: number }>> = {
  /** OpenAI Batch API: 50,000 requests and 200 MB per input file, one model per file. */
  openai: { requests: 50_000, bytes: 200 * 1024 * 1024 },
  /** Anthropic Message Batches: 100,000 requests or 256 MB per batch. */
  anthropic: { requests: 100_000, bytes: 256 * 1024 * 1024 },
};

/**
 * custom_id values both providers accept (Anthropic's rule, the stricter). A task id outside it (ours may hold `.`, `:`,
 * `@`, `/`) is sent under a mapped id, recorded in the part's map.
 */
const SAFE_CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/;

/** The custom_id sent for a task id: the id itself when the provider takes it, else `m-<index in part>`. */
export function customIdFor(taskId: string, indexInPart: number): string {
  // A real id shaped like a mapped one could collide with it: such ids are mapped too.
  if (SAFE_CUSTOM_ID.test(taskId) && !/^m-\d+$/.test(taskId)) return taskId;
  return `m-${indexInPart}`;
}

/** The provider of a model when the route does not name one: Anthropic's models are `claude-*`. */
export function providerOfModel(model: string): BatchProvider {
  return /^claude/i.test(model) ? 'anthropic' : 'openai';
}
