import { formatResetDuration } from '../src/sim/rate-limits';
import type { Simulator } from '../src/sim/simulator';
import { waitFor } from './support/wait-for';
import { useSimulators } from './support/suite-stack';

const simulator = useSimulators({ latency: { minMs: 0, maxMs: 0 } });

interface Request {
  key?: string;
  model?: string;
  prompt?: string;
  maxTokens?: number;
}

function complete(
  sim: Simulator,
  { key = 'k1', model = 'gpt-4o-mini', prompt = 'x'.repeat(40), maxTokens }: Request = {},
): Promise<Response> {
  return fetch(`${sim.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-fanout-task-id': 't' },
    body: JSON.stringify({
      model,
      messages: [{ role: 'user', content: prompt }],
      ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
    }),
  });
}

function limitHeaders(response: Response): Record<string, string | null> {
  const names = [
    'limit-requests',
    'remaining-requests',
    'reset-requests',
    'limit-tokens',
    'remaining-tokens',
    'reset-tokens',
  ];
  return Object.fromEntries(names.map((name) => [name, response.headers.get(`x-ratelimit-${name}`)]));
}

describe('the simulated provider rate limits', () => {
  it('sends the x-ratelimit-* headers on every response, counting down the requests and tokens of the key', async () => {
    // Slow refill (1 request and 100 tokens a second), so the count-down is not hidden by what refills meanwhile.
    const sim = await simulator({
      rateLimits: { requestsPerMinute: 60, tokensPerMinute: 6000 },
      completionTokens: { min: 20, max: 20 },
    });
    const first = await complete(sim);
    const second = await complete(sim);
    expect(first.status).toBe(200);
    expect(limitHeaders(first)).toMatchObject({
      'limit-requests': '60',
      'remaining-requests': '59',
      'limit-tokens': '6000',
    });
    expect(limitHeaders(second)['remaining-requests']).toBe('58');
    // 40 characters of prompt count 10 tokens, and the answer 20: 30 tokens per request.
    const remainingTokens = Number(second.headers.get('x-ratelimit-remaining-tokens'));
    expect(remainingTokens).toBeGreaterThanOrEqual(6000 - 60);
    expect(remainingTokens).toBeLessThan(6000 - 30);
    expect(second.headers.get('x-ratelimit-reset-requests')).toMatch(/^\d+(\.\d+)?m?s$/);
  });

  it("refuses a request over the requests-per-minute limit with 429, Retry-After and OpenAI's error shape, and does not charge it", async () => {
    const sim = await simulator({ rateLimits: { requestsPerMinute: 60, burstSeconds: 2 } });
    expect((await complete(sim)).status).toBe(200);
    expect((await complete(sim)).status).toBe(200);
    const refused = await complete(sim);
    expect(refused.status).toBe(429);
    const body = (await refused.json()) as { error: { type: string; code: string; message: string } };
    expect(body.error).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded' });
    expect(body.error.message).toContain('requests per min (RPM): Limit 60');
    const retryAfterMs = Number(refused.headers.get('retry-after-ms'));
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(1000);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refused.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(sim.stats().rateLimited).toBe(1);
    expect(sim.log()[2]).toMatchObject({ outcome: 429, rateLimited: 'requests' });
  });

  it('refills continuously: a refused request is admitted once its Retry-After has passed', async () => {
    const sim = await simulator({ rateLimits: { requestsPerMinute: 120, burstSeconds: 0.5 } });
    expect((await complete(sim)).status).toBe(200);
    const refused = await complete(sim);
    expect(refused.status).toBe(429);
    const refusedAt = Date.now();
    const retryAfterMs = Number(refused.headers.get('retry-after-ms'));
    const admitted = await waitFor(
      'a request to be admitted again',
      async () => ((await complete(sim)).status === 200 ? Date.now() : undefined),
      {
        timeoutMs: 5000,
        intervalMs: 50,
      },
    );
    expect(admitted - refusedAt).toBeGreaterThanOrEqual(retryAfterMs - 60);
  });

  it('charges prompt + max_tokens while a request is in flight and settles to the tokens used when it answers', async () => {
    const sim = await simulator({
      rateLimits: { tokensPerMinute: 1000 },
      completionTokens: { min: 20, max: 20 },
      latency: { minMs: 400, maxMs: 400 },
    });
    const slow = complete(sim, { maxTokens: 500 });
    // In flight: 10 prompt tokens + the 500 it may produce are reserved.
    const reserved = await waitFor('the request to be admitted', () => {
      const remaining = sim.stats().rateLimits?.[0]?.tokensRemaining;
      return remaining !== undefined && 1000 - remaining;
    });
    // (less what refilled while we looked: 1000 tokens a minute is about 2 per poll)
    expect(reserved).toBeGreaterThanOrEqual(495);
    expect(reserved).toBeLessThanOrEqual(510);
    const answered = await slow;
    // Answered with 20 tokens: only 10 + 20 stay charged (plus a little refill since).
    expect(Number(answered.headers.get('x-ratelimit-remaining-tokens'))).toBeGreaterThanOrEqual(1000 - 30);
    expect(sim.log()[0].rateLimitTokens).toBe(30);
  });

  it('refuses a request whose token estimate does not fit with a 429 of type tokens', async () => {
    const sim = await simulator({ rateLimits: { requestsPerMinute: 1000, tokensPerMinute: 6000, burstSeconds: 10 } });
    // Capacity 1000 tokens: the first request reserves 10 + 900, the second cannot fit until the first settles.
    const first = complete(sim, { maxTokens: 900 });
    const refused = await waitFor('the second request to be refused for tokens', async () => {
      const response = await complete(sim, { maxTokens: 900 });
      return response.status === 429 ? response : undefined;
    });
    expect(((await refused.json()) as { error: { type: string } }).error.type).toBe('tokens');
    expect((await first).status).toBe(200);
  });

  it('keeps separate limits per API key and per model', async () => {
    const sim = await simulator({ rateLimits: { requestsPerMinute: 60, burstSeconds: 1 } });
    expect((await complete(sim, { key: 'a' })).status).toBe(200);
    expect((await complete(sim, { key: 'a' })).status).toBe(429);
    expect((await complete(sim, { key: 'b' })).status).toBe(200);
    expect((await complete(sim, { key: 'a', model: 'gpt-4o' })).status).toBe(200);
  });

  it('formats reset durations as OpenAI does', () => {
    expect(formatResetDuration(20)).toBe('20ms');
    expect(formatResetDuration(1500)).toBe('1.5s');
    expect(formatResetDuration(360_000)).toBe('6m0s');
  });

  it('answers without rate-limit headers when no limits are configured', async () => {
    const sim = await simulator({});
    const response = await complete(sim);
    expect(response.headers.get('x-ratelimit-limit-requests')).toBeNull();
  });
});
