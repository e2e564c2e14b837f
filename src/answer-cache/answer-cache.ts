import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { childOf } from '../contract/location';
import { DEFAULT_CACHE_TTL_MS, type AnswerCacheSettings } from '../contract/answer-cache';
import { FailureType } from '../contract/failure-types';
import { StorageError, storeFromEnvironment, type ObjectStorage } from '../store';
import { integerFromEnvironment } from '../config/environment';
import { decodeEntry, encodeEntry } from './cache-entry';

/** The location of the cache when the run names none: beside the payloads of the store the worker uses. */
export function defaultCacheLocation(storeRoot: string): string {
  return childOf(storeRoot, 'answer-cache');
}

/** Where one entry lives: a folder per first two hex digits, so no folder holds millions of files. */
export function entryLocation(location: string, key: string): string {
  return childOf(location, `${key.slice(0, 2)}/${key}.json`);
}

/** What `through` gives back: the answer, and whether it came without a request (a stored entry, or a twin in flight). */
export interface CacheOutcome<T> {
  value: T;
  cached: boolean;
}

/** What a call through the cache says about itself (its failures name it). */
export interface CachedCall {
  /** The task the request is for. */
  taskId: string;
  /** How failures name the call: `agent "<id>"`, `tool search of agent "<id>"`. */
  label: string;
  /**
   * What ends this call (its activity's cancellation, its lane's stop): a call waiting on an identical one in flight
   * stops waiting at once and throws the signal's reason, as its own request would have been aborted.
   */
  signals?: readonly (AbortSignal | undefined)[];
}

/** `promise`, or the reason of the first of `signals` to abort. */
function unlessAborted<T>(promise: Promise<T>, signals: readonly (AbortSignal | undefined)[] = []): Promise<T> {
  const live = signals.filter((signal): signal is AbortSignal => signal !== undefined);
  const aborted = live.find((signal) => signal.aborted);
  if (aborted) return Promise.reject(aborted.reason as Error);
  if (live.length === 0) return promise;
  return new Promise<T>((resolve, reject) => {
    const listeners = live.map((signal) => {
      const listener = () => {
        stop();
        reject(signal.reason as Error);
      };
      signal.addEventListener('abort', listener, { once: true });
      return { signal, listener };
    });
    const stop = () => {
      for (const { signal, listener } of listeners) signal.removeEventListener('abort', listener);
    };
    promise.then(
      (value) => {
        stop();
        resolve(value);
      },
      (error: unknown) => {
        stop();
        reject(error as Error);
      },
    );
  });
}

export interface AnswerCacheDependencies {
  storage: ObjectStorage;
  /** Where entries go when the run names no location: the worker's payload store root. */
  storeRoot: string;
  /** Epoch ms, for entries' ages. */
  now?: () => number;
  /** A corrupted entry, a store that could not be read or written: the call goes on, and says so here. */
  warn?: (message: string) => void;
  /**
   * Crash tests only: how long a call waits after storing its answer before it returns, ms, so a test can kill the
   * worker between the two (FANOUT_CACHE_HOLD_AFTER_WRITE_MS). Default 0.
   */
  holdAfterWriteMs?: number;
}

/**
 * The answer cache across runs (README, "Answer cache"). One per worker process: it also holds the requests in flight,
 * so identical requests made at once on one worker are sent once and the others get its answer.
 *
 * An entry is written before the call returns, so before its activity completes: a worker killed after the answer
 * arrived finds it on the retry rather than paying for it again. Writes that fail are warned of and the answer still
 * returned (it is paid for; failing the call would only send it again).
 */
export class AnswerCache {
  private readonly inFlight = new Map<string, Promise<CacheOutcome<unknown>>>();
  private readonly now: () => number;
  private readonly warn: (message: string) => void;

  constructor(private readonly dependencies: AnswerCacheDependencies) {
    this.now = dependencies.now ?? Date.now;
    this.warn = dependencies.warn ?? warnWhereCalled;
  }

  /**
   * The answer to the request named `key`: from the cache when `settings` allow and it holds one, else from `send`
   * (stored after, under `read-write`). `replay` never sends: a miss throws CacheMiss, not retried.
   */
  async through<T>(
    settings: AnswerCacheSettings | undefined,
    key: string,
    call: CachedCall,
    send: () => Promise<T>,
    isAnswer: (value: unknown) => value is T = (value: unknown): value is T => value !== undefined,
  ): Promise<CacheOutcome<T>> {
    if (settings === undefined || settings.mode === 'off') return { value: await send(), cached: false };
    const uri = entryLocation(settings.location ?? defaultCacheLocation(this.dependencies.storeRoot), key);
    const twin = this.inFlight.get(uri) as Promise<CacheOutcome<T>> | undefined;
    if (twin) {
      let outcome: CacheOutcome<T> | undefined;
      try {
        outcome = await unlessAborted(twin, call.signals);
      } catch {
        // This call's own end (cancelled, stopped) is not the twin's failure: it ends here.
        const ended = call.signals?.find((signal) => signal?.aborted);
        if (ended) throw ended.reason;
      }
      if (outcome) return { value: outcome.value, cached: true };
      // The twin failed (cancelled, timed out, refused): this call's own attempt decides its own outcome.
      return this.through(settings, key, call, send, isAnswer);
    }
    const work = this.lookUpOrSend(settings, uri, key, call, send, isAnswer);
    this.inFlight.set(uri, work);
    try {
      return await work;
    } finally {
      this.inFlight.delete(uri);
    }
  }

  private async lookUpOrSend<T>(
    settings: AnswerCacheSettings,
    uri: string,
    key: string,
    call: CachedCall,
    send: () => Promise<T>,
    isAnswer: (value: unknown) => value is T,
  ): Promise<CacheOutcome<T>> {
    const found = await this.read(settings, uri, key, call, isAnswer);
    if ('value' in found) return { value: found.value, cached: true };
    if (settings.mode === 'replay') {
      throw ApplicationFailure.create({
        type: FailureType.CacheMiss,
        message: `${call.label}: --cache replay and the answer cache holds no answer for request ${key}${found.why ? ` (${found.why})` : ''}; run it once with --cache read-write to record it`,
        nonRetryable: true,
        details: [{ taskId: call.taskId, hash: key }],
      });
    }
    const value = await send();
    if (settings.mode === 'read-write') {
      await this.write(uri, key, value, call);
      const hold = this.dependencies.holdAfterWriteMs ?? 0;
      if (hold > 0) await new Promise((resolve) => setTimeout(resolve, hold));
    }
    return { value, cached: false };
  }

  private async read<T>(
    settings: AnswerCacheSettings,
    uri: string,
    key: string,
    call: CachedCall,
    isAnswer: (value: unknown) => value is T,
  ): Promise<{ value: T } | { why?: string }> {
    let data: Buffer;
    try {
      data = await this.dependencies.storage.read(uri);
    } catch (error) {
      if (error instanceof StorageError && error.code === 'NotFound') return {};
      // Replay must not turn a store outage into a test failure that says "miss": retried, as any storage failure is.
      if (settings.mode === 'replay') {
        throw ApplicationFailure.create({
          type: FailureType.StorageUnavailable,
          message: `${call.label}: the answer cache could not be read: ${error instanceof Error ? error.message : String(error)}`,
        });
      }
      this.warn(
        `${call.label}: the answer cache could not be read (${error instanceof Error ? error.message : String(error)}); sending the request`,
      );
      return { why: 'the cache could not be read' };
    }
    const entry = decodeEntry(key, data);
    if ('corrupt' in entry || !isAnswer(entry.answer)) {
      const why = 'corrupt' in entry ? entry.corrupt : 'does not hold an answer';
      this.warn(`${call.label}: the answer cache's entry ${uri} ${why}; treated as a miss`);
      return { why: `its entry ${why}` };
    }
    // A replayed recording is kept as long as it is there: CI must not start failing because fixtures aged.
    const ttlMs = settings.ttlMs ?? DEFAULT_CACHE_TTL_MS;
    if (settings.mode !== 'replay' && this.now() - entry.storedAtMs > ttlMs) return { why: 'its entry expired' };
    return { value: entry.answer };
  }

  private async write(uri: string, key: string, value: unknown, call: CachedCall): Promise<void> {
    try {
      // Unflushed: the entry survives the process being killed (the case it is written early for), not power loss.
      await this.dependencies.storage.write(uri, encodeEntry(key, value, this.now()), { sync: false });
    } catch (error) {
      this.warn(
        `${call.label}: the answer could not be stored in the answer cache (${error instanceof Error ? error.message : String(error)})`,
      );
    }
  }
}

/** To the activity's log when called from one (it names the workflow and activity), else to stderr. */
function warnWhereCalled(message: string): void {
  try {
    Context.current().log.warn(message);
  } catch {
    console.warn(`temporal-fanout: ${message}`);
  }
}

let shared: AnswerCache | undefined;

/** The process's answer cache, on the storage of its payload store (FANOUT_STORE). */
export function defaultAnswerCache(): AnswerCache {
  if (!shared) {
    const { storage, store } = storeFromEnvironment();
    shared = new AnswerCache({
      storage,
      storeRoot: store.root,
      holdAfterWriteMs: integerFromEnvironment('FANOUT_CACHE_HOLD_AFTER_WRITE_MS') ?? 0,
    });
  }
  return shared;
}
