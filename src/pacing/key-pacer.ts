import { AimdLimit, type LimitChange } from './aimd';
import { BucketMirror, type BucketSnapshot } from './bucket-mirror';
import { readRateLimitHeaders, type RateLimitReading } from './rate-limit-headers';

export type { BucketSnapshot } from './bucket-mirror';

/**
 * Admission control for one provider + model + API key, in one worker process.
 *
 * Two things gate a request:
 * - a mirror of the provider's request and token buckets, rebuilt from the `x-ratelimit-*` headers of every response.
 *   Between responses it refills at the provider's rate less what other clients of the same key were seen to use,
 *   and each admission takes its cost out. A request waits until the mirror holds its cost plus some headroom.
 *   Its token cost is reserved as prompt + max tokens; the provider's next headers give back what the answer did not
 *   use (or the pacer does, when the response carried none).
 * - an AIMD concurrency limit: halved by a 429, grown back slowly. It is what paces a provider that sends no headers,
 *   and the second line of defence when several processes misjudge a shared limit at once.
 * A 429 also pauses the key for its Retry-After.
 */
export interface KeyPacerOptions {
  /** Requests in flight before any response has been seen. */
  probeConcurrency: number;
  /** Highest concurrency limit. */
  maxConcurrency: number;
  /** Share of each provider bucket left unused as a margin for the other processes' unseen requests, 0 to 0.5. */
  headroom: number;
  /** Clock, ms. */
  now: () => number;
}

export interface PacerKey {
  /** The provider's base URL. */
  provider: string;
  model: string;
  /** A short, non-reversible id of the API key. */
  keyId: string;
}

export interface PacerSnapshot extends PacerKey {
  /** Requests this process lets run at once for the key now. */
  concurrencyLimit: number;
  inFlight: number;
  /** Calls waiting for admission. */
  queued: number;
  requests?: BucketSnapshot;
  tokens?: BucketSnapshot;
  /** Milliseconds left of a 429's Retry-After pause. */
  pausedForMs: number;
  admitted: number;
  /** 429s answered to this process for the key. */
  rateLimited: number;
  /** Total time calls spent waiting for admission, ms. */
  waitedMs: number;
  /** The last moves of the concurrency limit, newest last. */
  changes: LimitChange[];
}

/** How a paced request ended, with the response headers when there was a response. */
export type PacedOutcome =
  | { kind: 'answered'; headers?: Headers; usedTokens?: number }
  | { kind: 'rate-limited'; headers?: Headers; retryAfterMs?: number }
  | { kind: 'failed'; headers?: Headers }
  | { kind: 'abandoned' };

export interface Permit {
  /** Milliseconds the call waited for admission. */
  readonly waitedMs: number;
  /** Reports how the request ended and frees its place. Call exactly once. */
  release(outcome: PacedOutcome): void;
}

const MAX_CHANGES = 20;
/** Shortest pause after a 429, ms: a Retry-After of 0 must not turn into a tight loop of refused requests. */
const MIN_PAUSE_MS = 100;
/** When the estimate says "wait", look again at least this often (responses may correct the estimate sooner). */
const MAX_RECHECK_MS = 500;
/**
 * With nothing in flight, no response can correct the estimate: after this long without one, a call goes anyway, to
 * read the provider's headers afresh (at worst it gets a 429 and its Retry-After).
 */
const STALE_MS = 2000;

interface Waiter {
  tokens: number;
  enqueuedAt: number;
  resolve: (permit: Permit) => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal;
  onAbort: () => void;
}

export class KeyPacer {
  private readonly concurrency: AimdLimit;
  private readonly queue: Waiter[] = [];
  private requests: BucketMirror | undefined;
  private tokens: BucketMirror | undefined;
  private answeredOnce = false;
  private inFlight = 0;
  private seq = 0;
  private pausedUntil = 0;
  private lastEventAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private admitted = 0;
  private rateLimited = 0;
  private waitedMs = 0;
  private readonly changes: LimitChange[] = [];

  constructor(
    readonly key: PacerKey,
    private readonly options: KeyPacerOptions,
    private readonly onChange: (key: PacerKey, change: LimitChange) => void = () => undefined,
  ) {
    this.concurrency = new AimdLimit({ initial: options.maxConcurrency, maximum: options.maxConcurrency });
  }

  /**
   * Waits until a request reserving `tokens` may go, then returns its permit. Rejects with the signal's reason when
   * the signal aborts first (cancellation, or the caller's own wait budget).
   */
  acquire(tokens: number, signal: AbortSignal): Promise<Permit> {
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<Permit>((resolve, reject) => {
      const waiter: Waiter = {
        tokens,
        enqueuedAt: this.options.now(),
        resolve,
        reject,
        signal,
        onAbort: () => {
          const index = this.queue.indexOf(waiter);
          if (index >= 0) this.queue.splice(index, 1);
          reject(signal.reason);
          this.pump();
        },
      };
      signal.addEventListener('abort', waiter.onAbort, { once: true });
      this.queue.push(waiter);
      this.pump();
    });
  }

  /**
   * A permit at once if `acquire` would give one without waiting (nobody queued, the limits allow it), else undefined:
   * the common case without the waiter and its abort listener.
   */
  admitIfFree(tokens: number): Permit | undefined {
    if (this.queue.length > 0) return undefined;
    const now = this.options.now();
    const waiter = { tokens, enqueuedAt: now };
    return this.waitFor(waiter, now) > 0 ? undefined : this.admit(waiter, now);
  }

  /**
   * A permit at once, whatever the limits say: for a call that has no time to wait (an attempt scheduled without a
   * rate-limit wait budget). Its outcome still teaches the pacer.
   */
  admitNow(tokens: number): Permit {
    return this.admit({ tokens, enqueuedAt: this.options.now() }, this.options.now());
  }

  private get limit(): number {
    return this.answeredOnce ? this.concurrency.limit : Math.min(this.concurrency.limit, this.options.probeConcurrency);
  }

  /** Milliseconds until the head of the queue may go; Infinity when it waits for a request to finish. */
  private waitFor(waiter: Pick<Waiter, 'tokens'>, now: number): number {
    if (this.inFlight >= this.limit) return Number.POSITIVE_INFINITY;
    const { headroom } = this.options;
    const paused = this.pausedUntil - now;
    const mirrored = Math.max(
      this.requests?.msUntil(1, headroom, now) ?? 0,
      this.tokens?.msUntil(waiter.tokens, headroom, now) ?? 0,
    );
    const stale = this.inFlight === 0 ? Math.max(0, this.lastEventAt + STALE_MS - now) : Number.POSITIVE_INFINITY;
    return Math.max(paused, Math.min(mirrored, stale), 0);
  }

  private pump(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const now = this.options.now();
    while (this.queue.length > 0) {
      const head = this.queue[0];
      const wait = this.waitFor(head, now);
      if (wait === Number.POSITIVE_INFINITY) return;
      if (wait > 0) {
        this.timer = setTimeout(() => this.pump(), Math.min(Math.ceil(wait), MAX_RECHECK_MS));
        this.timer.unref();
        return;
      }
      this.queue.shift();
      head.signal.removeEventListener('abort', head.onAbort);
      head.resolve(this.admit(head, now));
    }
  }

  private admit(waiter: Pick<Waiter, 'tokens' | 'enqueuedAt'>, now: number): Permit {
    const seq = ++this.seq;
    this.lastEventAt = now;
    // Growing is earned only by requests that had to fill the limit (TCP's "cwnd-limited" rule).
    const limitBound = this.inFlight + 1 >= this.limit;
    this.inFlight += 1;
    this.admitted += 1;
    const debits = [this.requests?.take(1, now), this.tokens?.take(waiter.tokens, now)];
    const waitedMs = now - waiter.enqueuedAt;
    this.waitedMs += waitedMs;
    let released = false;
    return {
      waitedMs,
      release: (outcome) => {
        if (released) return;
        released = true;
        this.inFlight -= 1;
        if (outcome.kind !== 'abandoned') {
          if (debits[0]) this.requests?.arrived(debits[0]);
          if (debits[1]) this.tokens?.arrived(debits[1]);
        }
        this.finish(outcome, waiter.tokens, seq, limitBound);
        this.pump();
      },
    };
  }

  private observe(reading: RateLimitReading, now: number): void {
    if (reading.requests) {
      if (this.requests) this.requests.observe(reading.requests, now);
      else this.requests = new BucketMirror(reading.requests, now);
    }
    if (reading.tokens) {
      if (this.tokens) this.tokens.observe(reading.tokens, now);
      else this.tokens = new BucketMirror(reading.tokens, now);
    }
  }

  private record(change: LimitChange | undefined): void {
    if (!change) return;
    this.changes.push(change);
    if (this.changes.length > MAX_CHANGES) this.changes.shift();
    this.onChange(this.key, change);
  }

  private finish(outcome: PacedOutcome, reservedTokens: number, seq: number, limitBound: boolean): void {
    const now = this.options.now();
    this.lastEventAt = now;
    const reading = outcome.kind === 'abandoned' ? {} : readRateLimitHeaders(outcome.headers);
    const fresh = reading.requests !== undefined || reading.tokens !== undefined;
    if (fresh) this.observe(reading, now);
    if (outcome.kind !== 'abandoned') this.answeredOnce = true;
    switch (outcome.kind) {
      case 'answered':
        // Without headers, give back what the answer did not use; with them, the provider already has.
        if (!fresh && outcome.usedTokens !== undefined)
          this.tokens?.give(Math.max(0, reservedTokens - outcome.usedTokens));
        if (limitBound) this.record(this.concurrency.grow(now));
        break;
      case 'rate-limited': {
        this.rateLimited += 1;
        if (!fresh) {
          this.requests?.give(1);
          this.tokens?.give(reservedTokens);
        }
        this.pausedUntil = Math.max(this.pausedUntil, now + Math.max(MIN_PAUSE_MS, outcome.retryAfterMs ?? 1000));
        this.record(
          this.concurrency.shrink(
            now,
            seq,
            this.seq,
            `429 from the provider${outcome.retryAfterMs === undefined ? '' : `, retry after ${outcome.retryAfterMs} ms`}`,
          ),
        );
        break;
      }
      case 'failed':
      case 'abandoned':
        if (!fresh) this.tokens?.give(reservedTokens);
        break;
    }
  }

  /** 429s answered to this process for the key, cheaply. */
  get rateLimitedCount(): number {
    return this.rateLimited;
  }

  /** The latest move of the concurrency limit (the object `snapshot().changes` ends with), cheaply. */
  get lastChange(): LimitChange | undefined {
    return this.changes.at(-1);
  }

  snapshot(): PacerSnapshot {
    const now = this.options.now();
    return {
      ...this.key,
      concurrencyLimit: this.limit,
      inFlight: this.inFlight,
      queued: this.queue.length,
      ...(this.requests ? { requests: this.requests.snapshot(now) } : {}),
      ...(this.tokens ? { tokens: this.tokens.snapshot(now) } : {}),
      pausedForMs: Math.max(0, Math.round(this.pausedUntil - now)),
      admitted: this.admitted,
      rateLimited: this.rateLimited,
      waitedMs: Math.round(this.waitedMs),
      changes: [...this.changes],
    };
  }
}
