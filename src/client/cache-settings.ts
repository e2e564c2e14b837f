import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { cacheModeSchema, CACHE_MODES, type AnswerCacheSettings } from '../contract/answer-cache';
import { childOf, parseLocation } from '../contract/location';
import { parseDuration } from '../contract/route-options';
import { InvalidInputError } from '../contract/validation';
import type { Environment } from '../config/environment';
import { defaultCacheLocation } from '../answer-cache/answer-cache';
import type { ObjectStorage } from '../store';

/** Where the client checks and resolves a run's cache: the store its workers share. */
export interface CacheStore {
  storage: ObjectStorage;
  /** The payload store's root (FANOUT_STORE): the cache's default location is under it. */
  root: string;
}

function refuse(message: string): never {
  throw new InvalidInputError([{ path: 'options.cache', message }]);
}

/**
 * A run's answer cache as every worker will use it: the run's own `cache` option, else FANOUT_CACHE, FANOUT_CACHE_STORE
 * and FANOUT_CACHE_TTL; `undefined` when off. Checked before anything starts: `replay` needs a location that was
 * named (FANOUT_CACHE_STORE, the option's `location`, or FANOUT_STORE: the per-user default store is no recording a CI
 * job can share), and `read-write` a location it can write (an object is written there and removed).
 */
export async function resolveCacheSettings(
  option: AnswerCacheSettings | undefined,
  store: CacheStore,
  environment: Environment = process.env,
): Promise<AnswerCacheSettings | undefined> {
  const fromEnvironment = environment.FANOUT_CACHE?.trim();
  let mode = option?.mode;
  if (mode === undefined && fromEnvironment) {
    const parsed = cacheModeSchema.safeParse(fromEnvironment);
    if (!parsed.success) refuse(`FANOUT_CACHE must be one of ${CACHE_MODES.join(', ')}, got "${fromEnvironment}"`);
    mode = parsed.data;
  }
  if (mode === undefined || mode === 'off') return undefined;
  const named = option?.location ?? (environment.FANOUT_CACHE_STORE?.trim() || undefined);
  if (named === undefined && mode === 'replay' && !environment.FANOUT_STORE?.trim())
    refuse(
      'replay needs a cache location to replay from: set FANOUT_CACHE_STORE (or --cache-store, or FANOUT_STORE) to where a read-write run recorded its answers',
    );
  const location =
    named === undefined
      ? defaultCacheLocation(store.root)
      : named.includes('://') || named.startsWith('/')
        ? named.replace(/\/+$/, '')
        : path.resolve(named);
  const parsedLocation = parseLocation(location);
  if ('error' in parsedLocation) refuse(`the cache location ${parsedLocation.error}, got "${location}"`);
  let ttlMs = option?.ttlMs;
  const ttlText = environment.FANOUT_CACHE_TTL?.trim();
  if (ttlMs === undefined && ttlText) {
    try {
      ttlMs = parseDuration(ttlText);
    } catch (error) {
      refuse(`FANOUT_CACHE_TTL: ${(error as Error).message}`);
    }
    if (ttlMs < 1) refuse(`FANOUT_CACHE_TTL must be at least 1 ms, got "${ttlText}"`);
  }
  if (mode === 'read-write') {
    const probe = childOf(location, `.write-check-${randomUUID()}`);
    try {
      await store.storage.write(probe, '');
      await store.storage.remove(probe);
    } catch (error) {
      refuse(
        `the cache location ${location} cannot be written (${error instanceof Error ? error.message : String(error)}); --cache read-write stores every answer there`,
      );
    }
  }
  return { mode, location, ...(ttlMs === undefined ? {} : { ttlMs }) };
}

/** The tasks with the run's cache on each that sets none of its own (each call reads it from its task). */
export function withCache<T extends { cache?: AnswerCacheSettings }>(
  tasks: readonly T[],
  cache: AnswerCacheSettings | undefined,
): T[] {
  return cache === undefined ? [...tasks] : tasks.map((task) => (task.cache ? task : { ...task, cache }));
}
