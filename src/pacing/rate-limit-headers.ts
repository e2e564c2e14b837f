/**
 * Reading the provider's own account of its rate limits. OpenAI (and servers that copy it: Azure OpenAI, vLLM's and
 * LiteLLM's proxies, the simulator) send these on every response, 429s included:
 *
 *   x-ratelimit-limit-requests: 600        x-ratelimit-limit-tokens: 150000
 *   x-ratelimit-remaining-requests: 599    x-ratelimit-remaining-tokens: 149200
 *   x-ratelimit-reset-requests: 100ms      x-ratelimit-reset-tokens: 320ms
 *
 * Anthropic sends `anthropic-ratelimit-requests-limit`, `-remaining` and `-reset` (and the same for `tokens`), the reset
 * an RFC 3339 time; they are read as the same readings.
 *
 * "reset" is the time until the budget is whole again, which with "remaining" and the per-minute "limit" tells how
 * big the provider's bucket is (a limit may be enforced over less than a minute).
 */

/** One limit as one response reported it. */
export interface LimitReading {
  /** The per-minute limit. */
  limit: number;
  /** What is left now. */
  remaining: number;
  /** Milliseconds until the budget is full again; undefined when not sent or unreadable. */
  resetMs: number | undefined;
}

export interface RateLimitReading {
  requests?: LimitReading;
  tokens?: LimitReading;
}

const UNIT_MS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001, µs: 0.001, ns: 0.000001 };

/**
 * Parses a Go-style duration as OpenAI writes them (`1s`, `6m0s`, `20ms`, `1h2m3.5s`); a bare number is seconds.
 * Returns undefined for anything else.
 */
export function parseResetDuration(text: string | null | undefined): number | undefined {
  if (text === null || text === undefined) return undefined;
  const trimmed = text.trim();
  if (trimmed === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed) * 1000;
  const pattern = /(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)/gy;
  let total = 0;
  let consumed = 0;
  for (let match = pattern.exec(trimmed); match !== null; match = pattern.exec(trimmed)) {
    total += Number(match[1]) * UNIT_MS[match[2]];
    consumed = pattern.lastIndex;
  }
  return consumed === trimmed.length && consumed > 0 ? total : undefined;
}

function number(headers: Headers, name: string): number | undefined {
  const value = headers.get(name);
  if (value === null || value.trim() === '') return undefined;
  const parsed = Number(value);
  return Number.isFinite(parsed) && parsed >= 0 ? parsed : undefined;
}

/** Milliseconds from `now` until an RFC 3339 time (Anthropic's resets); undefined when unreadable. */
function msUntil(text: string | null, now: number): number | undefined {
  if (text === null || text.trim() === '') return undefined;
  const at = Date.parse(text);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

function reading(headers: Headers, kind: 'requests' | 'tokens', now: number): LimitReading | undefined {
  const limit = number(headers, `x-ratelimit-limit-${kind}`);
  const remaining = number(headers, `x-ratelimit-remaining-${kind}`);
  if (limit !== undefined && remaining !== undefined && limit !== 0)
    return { limit, remaining, resetMs: parseResetDuration(headers.get(`x-ratelimit-reset-${kind}`)) };
  // Anthropic's names: `anthropic-ratelimit-requests-limit`, …-remaining, …-reset (a time, not a duration).
  const anthropicLimit = number(headers, `anthropic-ratelimit-${kind}-limit`);
  const anthropicRemaining = number(headers, `anthropic-ratelimit-${kind}-remaining`);
  if (anthropicLimit === undefined || anthropicRemaining === undefined || anthropicLimit === 0) return undefined;
  return {
    limit: anthropicLimit,
    remaining: anthropicRemaining,
    resetMs: msUntil(headers.get(`anthropic-ratelimit-${kind}-reset`), now),
  };
}

/** The request and token limits a response reports (OpenAI's headers, or Anthropic's); empty when it sends none. */
export function readRateLimitHeaders(headers: Headers | undefined, now: number = Date.now()): RateLimitReading {
  if (!headers) return {};
  const requests = reading(headers, 'requests', now);
  const tokens = reading(headers, 'tokens', now);
  return { ...(requests ? { requests } : {}), ...(tokens ? { tokens } : {}) };
}
