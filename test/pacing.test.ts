import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import OpenAI from 'openai';
import type { ChatDependencies } from '../src/llm/send-chat';
import { sendTaskChat } from '../src/llm/send-task-chat';
import { createLlmClient } from '../src/llm/llm-client';
import type { AgentCallResult } from '../src/contract/agent-call';
import type { AgentTask } from '../src/contract/agent-task';
import { RATE_LIMIT_WAIT_MS } from '../src/contract/run-option-defaults';
import { KeyPacer, type KeyPacerOptions, type PacedOutcome } from '../src/pacing/key-pacer';
import { apiKeyId, Pacer, resolvePacerOptions } from '../src/pacing/pacer';
import { PacerRateLimitReader } from '../src/metrics/pacer-rate-limits';
import type { PacerSnapshot } from '../src/pacing/key-pacer';
import { parseResetDuration, readRateLimitHeaders } from '../src/pacing/rate-limit-headers';
import type { Simulator } from '../src/sim/simulator';
import { eventsQuery } from '../src/workflows/messages';
import { runCli } from './support/processes';
import { startTestServers, startTestWorker, type TestServers, type TestWorker } from './support/test-stack';
import { activityEnvironment } from './support/activity-environment';
import { useSimulators } from './support/suite-stack';

function headers(values: Record<string, string | number>): Headers {
  return new Headers(
    Object.fromEntries(Object.entries(values).map(([name, value]) => [`x-ratelimit-${name}`, String(value)])),
  );
}

function keyPacer(options: Partial<KeyPacerOptions> = {}): KeyPacer {
  return new KeyPacer(
    { provider: 'p', model: 'm', keyId: 'k' },
    { probeConcurrency: 8, maxConcurrency: 8, headroom: 0.1, now: Date.now, ...options },
  );
}

/** Whether a promise has settled by the next turn of the event loop. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

const never = new AbortController().signal;

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe("reading the provider's rate-limit headers", () => {
  it("reads OpenAI's durations: 6m0s, 20ms, 1.5s, 1h2m3.5s, and bare seconds", () => {
    expect(parseResetDuration('6m0s')).toBe(360_000);
    expect(parseResetDuration('20ms')).toBe(20);
    expect(parseResetDuration('1.5s')).toBe(1500);
    expect(parseResetDuration('1h2m3.5s')).toBe(3_723_500);
    expect(parseResetDuration('2')).toBe(2000);
    expect(parseResetDuration('soon')).toBeUndefined();
  });

  it('reads the request and token limits, and nothing when a server sends none', () => {
    const reading = readRateLimitHeaders(
      headers({
        'limit-requests': 600,
        'remaining-requests': 599,
        'reset-requests': '100ms',
        'limit-tokens': 150000,
        'remaining-tokens': 149000,
      }),
    );
    expect(reading).toEqual({
      requests: { limit: 600, remaining: 599, resetMs: 100 },
      tokens: { limit: 150000, remaining: 149000, resetMs: undefined },
    });
    expect(readRateLimitHeaders(new Headers())).toEqual({});
  });
});

describe("a key's pacer", () => {
  it("holds calls back once the provider's remaining requests reach the headroom, and lets them go as the bucket refills", async () => {
    // The pacer's own clock, moved by the test: a busy machine's pause between two looks must not count as the refill.
    let clock = 1_000_000;
    const pacer = keyPacer({ now: () => clock });
    // The provider says: 600 a minute (one per 100 ms), 3 left, full again in 200 ms (a bucket of 5).
    (await pacer.acquire(1, never)).release({
      kind: 'answered',
      headers: headers({ 'limit-requests': 600, 'remaining-requests': 3, 'reset-requests': '200ms' }),
    });
    const first = pacer.acquire(1, never);
    const second = pacer.acquire(1, never);
    const third = pacer.acquire(1, never);
    expect(await settled(first)).toBe(true);
    expect(await settled(second)).toBe(true);
    // 1 left would be under the headroom (10% of 5) once this one is taken: it waits for the refill.
    expect(await settled(third)).toBe(false);
    clock += 20;
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await settled(third)).toBe(false);
    clock += 100;
    expect((await third).waitedMs).toBe(120);
    expect(pacer.snapshot()).toMatchObject({ inFlight: 3, requests: { limitPerMinute: 600, capacity: 5 } });
  });

  it('reserves prompt + max tokens while a call is in flight and gives back what the answer did not use', async () => {
    const pacer = keyPacer();
    // 6000 tokens a minute (0.1 a ms), a full bucket of 1000: refilling 300 would take 3 s.
    (await pacer.acquire(1, never)).release({
      kind: 'answered',
      headers: headers({ 'limit-tokens': 6000, 'remaining-tokens': 1000, 'reset-tokens': '0ms' }),
    });
    const big = await pacer.acquire(600, never);
    const next = pacer.acquire(600, never);
    expect(await settled(next)).toBe(false);
    // The answer used 100 of its 600: 500 come back at once, and the next call fits.
    big.release({ kind: 'answered', usedTokens: 100 });
    const admitted = await next;
    expect(admitted.waitedMs).toBeLessThan(1000);
  });

  it('halves its concurrency on a 429, pauses the key for the Retry-After, and says so in its snapshot', async () => {
    const pacer = keyPacer();
    const permits = await Promise.all(Array.from({ length: 8 }, () => pacer.acquire(1, never)));
    permits[0].release({ kind: 'answered' });
    const outcome: PacedOutcome = { kind: 'rate-limited', retryAfterMs: 300 };
    permits[1].release(outcome);
    // A second 429 of a request already in flight at the first is the same event: no second halving.
    permits[2].release(outcome);
    const snapshot = pacer.snapshot();
    expect(snapshot).toMatchObject({ concurrencyLimit: 4, rateLimited: 2 });
    expect(snapshot.pausedForMs).toBeGreaterThan(200);
    expect(snapshot.changes).toEqual([
      expect.objectContaining({ from: 8, to: 4, reason: '429 from the provider, retry after 300 ms' }),
    ]);
    for (const permit of permits.slice(3)) permit.release({ kind: 'answered' });
    const after = await pacer.acquire(1, never);
    expect(after.waitedMs).toBeGreaterThanOrEqual(250);
  });

  it('sends the first wave at full width by default: every call up to the concurrency limit goes before any answer', async () => {
    const pacer = new Pacer(resolvePacerOptions({ maxConcurrency: 500 }, {})).forKey({
      provider: 'p',
      model: 'm',
      keyId: 'k',
    });
    const first = Array.from({ length: 500 }, () => pacer.acquire(1, never));
    const settledNow = await Promise.all(first.map((permit) => settled(permit)));
    expect(settledNow.every(Boolean)).toBe(true);
    // The limit still holds: the 501st waits for a place.
    const next = pacer.acquire(1, never);
    expect(await settled(next)).toBe(false);
    (await first[0]).release({ kind: 'answered' });
    expect(await settled(next)).toBe(true);
  });

  it('holds the first calls to FANOUT_PACING_PROBE_CONCURRENCY until an answer when one is set', async () => {
    const pacer = new Pacer(
      resolvePacerOptions({ maxConcurrency: 500 }, { FANOUT_PACING_PROBE_CONCURRENCY: '4' }),
    ).forKey({ provider: 'p', model: 'm', keyId: 'k' });
    const first = Array.from({ length: 5 }, () => pacer.acquire(1, never));
    expect(await Promise.all(first.map((permit) => settled(permit)))).toEqual([true, true, true, true, false]);
    (await first[0]).release({ kind: 'answered' });
    expect(await settled(first[4])).toBe(true);
  });

  it('gives up a queued call when its signal aborts, and keeps serving the others', async () => {
    const pacer = keyPacer({ maxConcurrency: 1, probeConcurrency: 1 });
    const holder = await pacer.acquire(1, never);
    const controller = new AbortController();
    const waiting = pacer.acquire(1, controller.signal);
    const other = pacer.acquire(1, never);
    controller.abort(new Error('cancelled'));
    await expect(waiting).rejects.toThrow('cancelled');
    holder.release({ kind: 'answered' });
    await expect(other).resolves.toBeDefined();
  });
});

describe('agent calls against a rate-limited provider', () => {
  const simulator = useSimulators({ latency: { minMs: 50, maxMs: 50 } });

  function dependencies(sim: Simulator, pacer: Pacer, extra: Partial<ChatDependencies> = {}): ChatDependencies {
    return {
      llm: createLlmClient({ baseURL: sim.baseUrl, apiKey: 'pacing' }),
      defaultModel: 'sim-model',
      clock: () => performance.now(),
      heartbeatIntervalMs: 1000,
      pacer,
      ...extra,
    };
  }

  /** One call as an activity attempt scheduled the way workflows schedule agent calls (with the wait budget). */
  function call(task: AgentTask, deps: ChatDependencies): Promise<AgentCallResult> {
    const environment = activityEnvironment({ startToCloseTimeoutMs: 30_000 + RATE_LIMIT_WAIT_MS });
    return environment.run(() => sendTaskChat(task, deps));
  }

  it('keeps a burst of 40 calls within a 300-a-minute limit, with at most one 429', async () => {
    const sim = await simulator({ rateLimits: { requestsPerMinute: 300, burstSeconds: 2 } });
    const pacer = new Pacer(resolvePacerOptions({ probeConcurrency: 1 }, {}));
    const deps = dependencies(sim, pacer);
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, index) => call({ id: `burst-${index}`, prompt: 'hello' }, deps)),
    );

    expect(results.every((result) => result.attempt === 1)).toBe(true);
    expect(sim.stats().rateLimited ?? 0).toBeLessThanOrEqual(1);
    expect(sim.log().filter((request) => request.outcome === 200)).toHaveLength(40);
    expect(pacer.snapshot()[0]).toMatchObject({
      model: 'sim-model',
      requests: { limitPerMinute: 300 },
      admitted: expect.any(Number),
    });
  });

  it('waits out 429s inside the attempt: a call refused three times succeeds on attempt 1', async () => {
    const sim = await simulator({});
    const result = await call(
      { id: 'refused', prompt: 'x [sim fault=429 times=3 retry-after=0]' },
      dependencies(sim, new Pacer(resolvePacerOptions({}, {}))),
    );
    expect(result.attempt).toBe(1);
    expect(sim.log().map((request) => [request.attempt, request.outcome])).toEqual([
      [1, 429],
      [1, 429],
      [1, 429],
      [1, 200],
    ]);
  });

  it('waits out 429s unpaced too (FANOUT_PACING=off), honouring Retry-After', async () => {
    const sim = await simulator({});
    const pacer = new Pacer(resolvePacerOptions({}, { FANOUT_PACING: 'off' }));
    const result = await call(
      { id: 'unpaced', prompt: 'x [sim fault=429 times=1 retry-after=1]' },
      dependencies(sim, pacer),
    );
    expect(result.attempt).toBe(1);
    const [refused, answered] = sim.log();
    expect(answered.arrivedAt - (refused.respondedAt ?? Number.NaN)).toBeGreaterThanOrEqual(1000);
  });

  it("fails RateLimitWaitExceeded, never retried, once the attempt's rate-limit wait budget is spent", async () => {
    const sim = await simulator({});
    const failure = await call(
      { id: 'starved', prompt: 'x [sim fault=429 retry-after=0]' },
      dependencies(sim, new Pacer(resolvePacerOptions({}, {})), { rateLimitWaitMs: 500 }),
    ).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({ type: 'RateLimitWaitExceeded', nonRetryable: true });
    expect(sim.log().every((request) => request.attempt === 1)).toBe(true);
  });

  it('treats 429 insufficient_quota as no rate limit: QuotaExceeded at once, never retried', async () => {
    const sim = await simulator({});
    // The simulator has no quota fault; this provider answers as OpenAI does to an account out of credit.
    let requests = 0;
    const llm = new OpenAI({
      apiKey: 'pacing',
      baseURL: sim.baseUrl,
      maxRetries: 0,
      fetch: async () => {
        requests += 1;
        const body = {
          error: { message: 'You exceeded your current quota', type: 'insufficient_quota', code: 'insufficient_quota' },
        };
        return new Response(JSON.stringify(body), { status: 429, headers: { 'content-type': 'application/json' } });
      },
    });
    const failure = await call(
      { id: 'broke', prompt: 'x' },
      dependencies(sim, new Pacer(resolvePacerOptions({}, {})), { llm }),
    ).catch((error: unknown) => error);
    expect(failure).toMatchObject({ type: 'QuotaExceeded', nonRetryable: true });
    expect(requests).toBe(1);
  });
});

describe('rate limits and attempts in a fan-out on a real dev server', () => {
  let servers: TestServers;
  let stack: TestWorker;

  beforeAll(async () => {
    servers = await startTestServers({
      simulator: { latency: { minMs: 30, maxMs: 30 }, rateLimits: { requestsPerMinute: 120, burstSeconds: 1 } },
    });
    stack = await startTestWorker(servers);
  });

  afterAll(async () => {
    await stack?.stop();
    await servers?.stop();
  });

  it('finishes every agent on its first attempt under a sustained rate limit, even with maximumAttempts 1', async () => {
    const tasks = Array.from({ length: 10 }, (_, index) => ({ id: `limited-${index}`, prompt: `limited ${index}` }));
    const { results } = await stack.client.runParallel(tasks, { retry: { maximumAttempts: 1 } });
    expect(results.map((result) => [result.status, result.attempts])).toEqual(tasks.map(() => ['ok', 1]));
  });

  it("shows the pacing in the run's progress and events: the limit, the provider's limits, and a 429's move", async () => {
    const tasks = Array.from({ length: 6 }, (_, index) => ({
      id: `paced-${index}`,
      prompt: `paced ${index}${index === 0 ? ' [sim fault=429 times=1 retry-after=0]' : ''}`,
    }));
    const handle = await stack.client.startParallel(tasks);
    await handle.result();
    const progress = await handle.progress();
    expect(progress.pacing?.keys).toHaveLength(1);
    const [key] = progress.pacing?.keys ?? [];
    expect(key).toMatchObject({
      model: 'gpt-4o-mini',
      worker: stack.worker.options.identity,
      requests: { limitPerMinute: 120 },
    });
    expect(key.rateLimited).toBeGreaterThanOrEqual(1);
    expect(progress.pacing?.moves).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ reason: expect.stringContaining('429'), to: expect.any(Number) }),
      ]),
    );
    const move = progress.pacing?.moves.find((candidate) => candidate.reason.includes('429'));
    expect(move && move.to < move.from).toBe(true);
    const page = await handle.workflow.query(eventsQuery, 0);
    expect(page.events.filter((event) => event.type === 'pacing').map((event) => event.detail)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^gpt-4o-mini concurrency limit \d+ → \d+ \(429 from the provider/),
      ]),
    );
  });

  it("shows the pacing in `batch status`: the limit per worker and model, the provider's limits, its moves", async () => {
    const directory = mkdtempSync(path.join(os.tmpdir(), 'pacing-batch-'));
    const source = path.join(directory, 'tasks.jsonl');
    const lines = Array.from({ length: 8 }, (_, index) =>
      JSON.stringify({
        id: `b${index}`,
        prompt: `batch ${index}${index === 2 ? ' [sim fault=429 times=1 retry-after=0]' : ''}`,
      }),
    );
    writeFileSync(source, `${lines.join('\n')}\n`);
    const handle = await stack.client.startBatch({
      source,
      sink: path.join(directory, 'out.jsonl'),
      options: { concurrency: 4 },
    });
    await handle.result();
    const cli = await runCli([
      'batch',
      'status',
      handle.batchId,
      '--address',
      servers.server.address,
      '--task-queue',
      stack.taskQueue,
    ]);
    expect(cli.stderr).toBe('');
    expect(cli.stdout).toMatch(
      new RegExp(
        `pacing:\\n +gpt-4o-mini on ${escape(String(stack.worker.options.identity))}: concurrency limit \\d+ \\(in flight \\d+, queued \\d+\\), requests 120/min \\(about \\d+ left now\\), 429s [1-9]`,
      ),
    );
    expect(cli.stdout).toMatch(/gpt-4o-mini concurrency limit \d+ → \d+ \(429 from the provider/);
    const json = JSON.parse(
      (
        await runCli([
          'batch',
          'status',
          handle.batchId,
          '--json',
          '--address',
          servers.server.address,
          '--task-queue',
          stack.taskQueue,
        ])
      ).stdout,
    );
    expect(json.pacing.keys[0]).toMatchObject({ model: 'gpt-4o-mini', requests: { limitPerMinute: 120 } });
  });

  it('still stops a real failure at maximumAttempts', async () => {
    const { results } = await stack.client.runParallel([{ id: 'broken', prompt: 'x [sim fault=500]' }], {
      retry: { maximumAttempts: 2, initialIntervalMs: 100 },
    });
    expect(results[0]).toMatchObject({ status: 'failed', attempts: 2, error: { type: 'ProviderUnavailable' } });
  });
});

describe('what every call asks of the pacer, cheaply', () => {
  it('names a key by the same short id every time, never the key itself', () => {
    expect(apiKeyId('sk-secret')).toBe(apiKeyId('sk-secret'));
    expect(apiKeyId('sk-secret')).toMatch(/^[0-9a-f]{8}$/);
    expect(apiKeyId('sk-other')).not.toBe(apiKeyId('sk-secret'));
  });

  it('counts 429s by model from snapshots taken only when the running total moved', () => {
    let total = 0;
    let snapshots = 0;
    const keys: Pick<PacerSnapshot, 'provider' | 'model' | 'keyId' | 'rateLimited'>[] = [
      { provider: 'p', model: 'm', keyId: 'k', rateLimited: 0 },
    ];
    const reader = new PacerRateLimitReader(
      () => {
        snapshots += 1;
        return keys as PacerSnapshot[];
      },
      () => total,
    );
    expect(reader.increments()).toEqual(new Map());
    expect(reader.increments()).toEqual(new Map());
    expect(snapshots).toBe(1);
    keys[0].rateLimited = 3;
    total = 3;
    expect(reader.increments()).toEqual(new Map([['m', 3]]));
    expect(reader.increments()).toEqual(new Map());
    expect(snapshots).toBe(2);
  });
});
