import { InvalidArgumentError, Option, type Command } from 'commander';
import { CACHE_MODES, cacheModeSchema, type AnswerCacheSettings, type CacheMode } from '../contract/answer-cache';
import { parseDuration } from '../contract/route-options';
import { InvalidInputError } from '../contract/validation';

export interface CacheFlags {
  cache?: CacheMode;
  cacheStore?: string;
  cacheTtl?: number;
}

/** --cache, --cache-store and --cache-ttl: the answer cache of the run or batch started (README, "Answer cache"). */
export function cacheOptions(): Option[] {
  return [
    new Option(
      '--cache <mode>',
      'answer cache across runs: read-write, read-only, replay (a miss fails, CacheMiss) or off (default FANOUT_CACHE, else off)',
    ).argParser((value: string) => {
      const parsed = cacheModeSchema.safeParse(value);
      if (!parsed.success)
        throw new InvalidArgumentError(`"${value}" is not a cache mode (use ${CACHE_MODES.join(', ')})`);
      return parsed.data;
    }),
    new Option(
      '--cache-store <location>',
      'where the answer cache lives: a directory or s3://bucket/prefix (default FANOUT_CACHE_STORE, else <FANOUT_STORE>/answer-cache)',
    ),
    new Option(
      '--cache-ttl <duration>',
      'entries older than this are misses, e.g. 7d (default FANOUT_CACHE_TTL, else 30d)',
    ).argParser((value: string) => {
      try {
        return parseDuration(value);
      } catch (error) {
        throw new InvalidArgumentError((error as Error).message);
      }
    }),
  ];
}

/** Adds the cache options to a command. */
export function withCacheOptions(command: Command): Command {
  for (const option of cacheOptions()) command.addOption(option);
  return command;
}

/**
 * The `cache` option the flags ask for, when they ask for one; the client fills in the rest from the environment
 * (FANOUT_CACHE, FANOUT_CACHE_STORE, FANOUT_CACHE_TTL) and checks it.
 */
export function cacheFromFlags(flags: CacheFlags, environment = process.env): AnswerCacheSettings | undefined {
  if (flags.cache === undefined && flags.cacheStore === undefined && flags.cacheTtl === undefined) return undefined;
  const fromEnvironment = cacheModeSchema.safeParse(environment.FANOUT_CACHE?.trim());
  const mode = flags.cache ?? (fromEnvironment.success ? fromEnvironment.data : undefined);
  if (mode === undefined)
    throw new InvalidInputError([
      { path: '--cache', message: 'is needed with --cache-store and --cache-ttl (or FANOUT_CACHE set to a mode)' },
    ]);
  return {
    mode,
    ...(flags.cacheStore === undefined ? {} : { location: flags.cacheStore }),
    ...(flags.cacheTtl === undefined ? {} : { ttlMs: flags.cacheTtl }),
  };
}
