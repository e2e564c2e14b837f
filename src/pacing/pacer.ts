import { createHash } from 'node:crypto';
import { integerFromEnvironment, numberFromEnvironment, type Environment } from '../config/environment';
import type { LimitChange } from './aimd';
import { KeyPacer, type PacerKey, type PacerSnapshot } from './key-pacer';

/** Pacing settings of a worker process. Every field falls back to an environment variable, then a default. */
export interface PacerOptions {
  /** Pace calls at all. Env FANOUT_PACING ("off" turns it off); default on. */
  enabled?: boolean;
  /** Highest concurrency limit per provider + model + key. Env FANOUT_PACING_MAX_CONCURRENCY; default 5000 (the widest batch: a worker's slots bound it first). */
  maxConcurrency?: number;
  /**
   * Calls in flight per key before the first response has been seen. Env FANOUT_PACING_PROBE_CONCURRENCY; default
   * `maxConcurrency`: the first wave goes out at full width (a probe of 32 held a batch of 3 s calls to 32 for its first
   * seconds), and a provider that pushes back with 429s halves the AIMD limit as at any other time.
   */
  probeConcurrency?: number;
  /**
   * Share of the provider's request and token buckets left unused, for the unseen requests of other workers.
   * Env FANOUT_PACING_HEADROOM; default 0.1.
   */
  headroom?: number;
  /** Tokens reserved for the answer of a task without `maxTokens`. Env FANOUT_PACING_COMPLETION_TOKENS; default 1024. */
  defaultCompletionTokens?: number;
  /** Clock, ms. Default Date.now. */
  now?: () => number;
}

export interface ResolvedPacerOptions {
  enabled: boolean;
  maxConcurrency: number;
  probeConcurrency: number;
  headroom: number;
  defaultCompletionTokens: number;
  now: () => number;
}

export function resolvePacerOptions(
  options: PacerOptions = {},
  environment: Environment = process.env,
): ResolvedPacerOptions {
  const switchValue = environment.FANOUT_PACING?.trim().toLowerCase();
  if (switchValue !== undefined && switchValue !== '' && !['on', 'off'].includes(switchValue)) {
    throw new Error(`FANOUT_PACING must be "on" or "off", got "${environment.FANOUT_PACING}"`);
  }
  const headroom = options.headroom ?? numberFromEnvironment('FANOUT_PACING_HEADROOM', environment) ?? 0.1;
  if (!(headroom >= 0 && headroom <= 0.5))
    throw new TypeError(`pacing headroom must be between 0 and 0.5, got ${headroom}`);
  const maxConcurrency =
    options.maxConcurrency ?? integerFromEnvironment('FANOUT_PACING_MAX_CONCURRENCY', environment) ?? 5000;
  return {
    enabled: options.enabled ?? switchValue !== 'off',
    maxConcurrency,
    probeConcurrency: Math.min(
      maxConcurrency,
      options.probeConcurrency ??
        integerFromEnvironment('FANOUT_PACING_PROBE_CONCURRENCY', environment) ??
        maxConcurrency,
    ),
    headroom,
    defaultCompletionTokens:
      options.defaultCompletionTokens ?? integerFromEnvironment('FANOUT_PACING_COMPLETION_TOKENS', environment) ?? 1024,
    now: options.now ?? Date.now,
  };
}

const keyIds = new Map<string, string>();

/** A short id of an API key for keys and logs: never the key itself. Hashed once per key (every call asks). */
export function apiKeyId(apiKey: string): string {
  let id = keyIds.get(apiKey);
  if (id === undefined) {
    id = createHash('sha256').update(apiKey).digest('hex').slice(0, 8);
    // A process uses a handful of keys; the bound only guards against a caller minting keys per call.
    if (keyIds.size >= 1000) keyIds.clear();
    keyIds.set(apiKey, id);
  }
  return id;
}

/**
 * The pacers of one worker process, one per provider + model + API key: every call of the process to the same
 * limit shares one, whichever workflow it belongs to.
 */
export class Pacer {
  private readonly keys = new Map<string, KeyPacer>();
  private readonly listeners = new Set<(key: PacerKey, change: LimitChange) => void>();

  constructor(readonly options: ResolvedPacerOptions) {}

  /** The pacer of a key, created on first use. */
  forKey(key: PacerKey): KeyPacer {
    const id = `${key.provider}\u0000${key.model}\u0000${key.keyId}`;
    let pacer = this.keys.get(id);
    if (!pacer) {
      pacer = new KeyPacer(key, this.options, (changed, change) => {
        for (const listener of this.listeners) listener(changed, change);
      });
      this.keys.set(id, pacer);
    }
    return pacer;
  }

  /** Calls `listener` whenever a key's concurrency limit moves. Returns the function that stops it. */
  onLimitChange(listener: (key: PacerKey, change: LimitChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  snapshot(): PacerSnapshot[] {
    return [...this.keys.values()].map((pacer) => pacer.snapshot());
  }

  /** 429s answered to this process, every key together: cheap to read, unlike a snapshot. */
  get rateLimited(): number {
    let total = 0;
    for (const pacer of this.keys.values()) total += pacer.rateLimitedCount;
    return total;
  }
}

let processPacer: Pacer | undefined;

/** The pacer every agent call of this process shares, configured from the environment on first use. */
export function defaultPacer(): Pacer {
  processPacer ??= new Pacer(resolvePacerOptions());
  return processPacer;
}

/**
 * The pacing state of this worker process, per provider + model + key: the concurrency limit and how it moved, the
 * provider's limits and what is left of them, queued calls, 429s. For status output and events.
 */
export function pacerSnapshot(): PacerSnapshot[] {
  return processPacer?.snapshot() ?? [];
}

/** 429s answered to this process so far, every key together (0 before its first paced call). */
export function pacerRateLimitedTotal(): number {
  return processPacer?.rateLimited ?? 0;
}
