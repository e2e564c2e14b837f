/**
 * The simulator's provider rate limits, modelled on OpenAI's: requests per minute and tokens per minute per API key
 * and model, each a bucket that refills continuously at limit/60 per second. A request is admitted when both buckets
 * hold enough: one request, and its token estimate (prompt characters / 4, plus `max_tokens`), which is what OpenAI
 * documents it counts at admission. When the answer is written the token charge is settled to what was really used
 * (prompt estimate + completion tokens). Every response carries the `x-ratelimit-*` headers; a request that does not
 * fit gets 429 with `retry-after` / `retry-after-ms` and is not charged.
 */

export interface RateLimitSettings {
  requestsPerMinute?: number;
  tokensPerMinute?: number;
  /**
   * Seconds of refill a bucket holds. 60 lets a full minute's budget go at once; OpenAI says it may enforce limits
   * over shorter windows ("60,000 requests/minute may be enforced as 1,000 requests/second"), which a smaller value
   * models. The headers still report the per-minute limit.
   */
  burstSeconds: number;
}

export type RateLimitKind = 'requests' | 'tokens';

/** A token bucket with continuous refill; `level` may not go below zero. */
class Bucket {
  private level: number;
  private updatedAt: number;

  constructor(
    readonly perMinute: number,
    readonly capacity: number,
    now: number,
  ) {
    this.level = capacity;
    this.updatedAt = now;
  }

  private refill(now: number): void {
    this.level = Math.min(this.capacity, this.level + ((now - this.updatedAt) * this.perMinute) / 60_000);
    this.updatedAt = now;
  }

  available(now: number): number {
    this.refill(now);
    return this.level;
  }

  take(amount: number, now: number): void {
    this.refill(now);
    this.level = Math.max(0, this.level - amount);
  }

  give(amount: number, now: number): void {
    this.refill(now);
    this.level = Math.min(this.capacity, this.level + amount);
  }

  /** Milliseconds until the bucket holds `amount` (Infinity if it never can). */
  msUntil(amount: number, now: number): number {
    this.refill(now);
    if (amount > this.capacity) return Number.POSITIVE_INFINITY;
    return Math.max(0, ((amount - this.level) * 60_000) / this.perMinute);
  }

  /** Milliseconds until the bucket is full again: OpenAI's `x-ratelimit-reset-*`. */
  msUntilFull(now: number): number {
    return this.msUntil(this.capacity, now);
  }
}

/** OpenAI writes durations like `1s`, `6m0s`, `20ms`, `1.5s`. */
export function formatResetDuration(ms: number): string {
  if (ms < 1000) return `${Math.ceil(ms)}ms`;
  const totalSeconds = Math.ceil(ms) / 1000;
  if (totalSeconds < 60) return `${Number(totalSeconds.toFixed(3))}s`;
  const minutes = Math.floor(totalSeconds / 60);
  return `${minutes}m${Number((totalSeconds - minutes * 60).toFixed(3))}s`;
}

export type Admission =
  | { admitted: true; charge: number; headers: () => Record<string, string>; settle: (usedTokens: number) => void }
  | { admitted: false; kind: RateLimitKind; retryAfterMs: number; message: string; headers: Record<string, string> };

interface Limits {
  requests?: Bucket;
  tokens?: Bucket;
}

export interface RateLimiterSnapshot {
  key: string;
  requestsRemaining?: number;
  tokensRemaining?: number;
}

/** Per key (API key + model) request and token buckets. */
export class SimulatedRateLimiter {
  private readonly limits = new Map<string, Limits>();

  constructor(
    private readonly settings: RateLimitSettings,
    private readonly now: () => number = Date.now,
  ) {}

  private limitsFor(key: string): Limits {
    let limits = this.limits.get(key);
    if (!limits) {
      const { requestsPerMinute, tokensPerMinute, burstSeconds } = this.settings;
      const now = this.now();
      const capacity = (perMinute: number) => Math.max(1, (perMinute * burstSeconds) / 60);
      limits = {
        requests:
          requestsPerMinute === undefined ? undefined : new Bucket(requestsPerMinute, capacity(requestsPerMinute), now),
        tokens: tokensPerMinute === undefined ? undefined : new Bucket(tokensPerMinute, capacity(tokensPerMinute), now),
      };
      this.limits.set(key, limits);
    }
    return limits;
  }

  private headers(limits: Limits, now: number): Record<string, string> {
    const headers: Record<string, string> = {};
    for (const [kind, bucket] of [
      ['requests', limits.requests],
      ['tokens', limits.tokens],
    ] as const) {
      if (!bucket) continue;
      headers[`x-ratelimit-limit-${kind}`] = String(bucket.perMinute);
      headers[`x-ratelimit-remaining-${kind}`] = String(Math.floor(bucket.available(now)));
      headers[`x-ratelimit-reset-${kind}`] = formatResetDuration(bucket.msUntilFull(now));
    }
    return headers;
  }

  /** Admits a request costing `tokens` for `key`, or says which limit it hit and when to try again. */
  admit(key: string, model: string, tokens: number): Admission {
    const limits = this.limitsFor(key);
    const now = this.now();
    const waits: [RateLimitKind, number, Bucket][] = [];
    if (limits.requests) waits.push(['requests', limits.requests.msUntil(1, now), limits.requests]);
    if (limits.tokens) waits.push(['tokens', limits.tokens.msUntil(tokens, now), limits.tokens]);
    const blocked = waits.filter(([, wait]) => wait > 0).sort((a, b) => b[1] - a[1])[0];
    if (blocked) {
      const [kind, wait, bucket] = blocked;
      const used = Math.round(bucket.capacity - bucket.available(now));
      const retryAfterMs = Number.isFinite(wait) ? Math.ceil(wait) : 60_000;
      const unit = kind === 'requests' ? 'requests per min (RPM)' : 'tokens per min (TPM)';
      const message =
        `simulated: Rate limit reached for ${model} on ${unit}: Limit ${bucket.perMinute}, Used ${used}, ` +
        `Requested ${kind === 'requests' ? 1 : tokens}. Please try again in ${formatResetDuration(retryAfterMs)}.`;
      return { admitted: false, kind, retryAfterMs, message, headers: this.headers(limits, now) };
    }
    limits.requests?.take(1, now);
    limits.tokens?.take(tokens, now);
    return {
      admitted: true,
      charge: tokens,
      headers: () => this.headers(limits, this.now()),
      settle: (usedTokens) => {
        if (usedTokens < tokens) limits.tokens?.give(tokens - usedTokens, this.now());
        else if (usedTokens > tokens) limits.tokens?.take(usedTokens - tokens, this.now());
      },
    };
  }

  snapshot(): RateLimiterSnapshot[] {
    const now = this.now();
    return [...this.limits.entries()].map(([key, limits]) => ({
      key,
      requestsRemaining: limits.requests === undefined ? undefined : Math.floor(limits.requests.available(now)),
      tokensRemaining: limits.tokens === undefined ? undefined : Math.floor(limits.tokens.available(now)),
    }));
  }
}

/** OpenAI's documented estimate of a request's tokens for rate limiting: characters / 4, plus `max_tokens`. */
export function rateLimitTokens(messages: readonly { content?: unknown }[], maxTokens: number | undefined): number {
  const characters = messages.reduce(
    (sum, message) => sum + (typeof message.content === 'string' ? message.content.length : 0),
    0,
  );
  return Math.ceil(characters / 4) + (maxTokens ?? 0);
}
