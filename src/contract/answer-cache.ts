import { z } from 'zod';

/**
 * How a run uses the answer cache (src/answer-cache/): `read-write` answers a request it has seen from the cache and
 * stores every new answer; `read-only` answers from it but stores nothing; `replay` answers only from it and fails a
 * request it does not hold (`CacheMiss`, never retried: deterministic CI for agent workflows); `off` (the default)
 * neither reads nor writes.
 */
export const cacheModeSchema = z.enum(['read-write', 'read-only', 'replay', 'off']);
export type CacheMode = z.infer<typeof cacheModeSchema>;

/** The modes the CLI and FANOUT_CACHE take, in the order help lists them. */
export const CACHE_MODES: readonly CacheMode[] = cacheModeSchema.options;

/**
 * The answer cache of a run, resolved by the client (FANOUT_CACHE, FANOUT_CACHE_STORE, FANOUT_CACHE_TTL or the run's
 * options) and carried by each call: the same settings on every worker.
 */
export const answerCacheSchema = z.strictObject({
  mode: cacheModeSchema,
  /** Where entries live: a directory or `s3://bucket/prefix`. Default `<FANOUT_STORE>/answer-cache`. */
  location: z.string().min(1).optional(),
  /** Entries older than this are misses (and are written again under `read-write`), ms. Default 30 days. */
  ttlMs: z.number().int().min(1).optional(),
});
export type AnswerCacheSettings = z.infer<typeof answerCacheSchema>;

/** How long an entry answers when the run sets no TTL: 30 days. */
export const DEFAULT_CACHE_TTL_MS = 30 * 24 * 60 * 60 * 1000;
