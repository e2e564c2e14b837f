import { z } from 'zod';

/**
 * A claim check: where a large value lives in the payload store, with its size and digest. History holds these
 * instead of the value; whoever needs the value (an activity, the client, the CLI) reads it from the store.
 */
export const payloadRefSchema = z.strictObject({
  /** A local path or an s3:// URI. */
  uri: z.string().min(1),
  bytes: z.number().int().min(0),
  /** Hex SHA-256 of the UTF-8 bytes; checked on every read. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
export type PayloadRef = z.infer<typeof payloadRefSchema>;

/**
 * Outputs at most this many bytes travel inline in results; larger ones go to the store and the result carries a
 * reference. A run also caps the inline size so that all of its results fit one payload (see `inlineOutputLimit`).
 */
export const DEFAULT_INLINE_OUTPUT_BYTES = 16 * 1024;

/** What a run's inline outputs may add up to: a workflow's result must stay well under Temporal's 2 MB payload limit. */
export const RUN_INLINE_BUDGET_BYTES = 1024 * 1024;

/** The inline limit for one output of a run of `tasks` agents. */
export function inlineOutputLimit(tasks: number, requested = DEFAULT_INLINE_OUTPUT_BYTES): number {
  return Math.max(0, Math.min(requested, Math.floor(RUN_INLINE_BUDGET_BYTES / Math.max(1, tasks))));
}
