import { writeFileSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import type { BatchResultLine } from '../src/contract/batch';
import { usageFromAnthropic, usageFromChat, usageFromResponses } from '../src/llm/token-usage';
import { promptCacheKeyOf, stableMessages, stableTools } from '../src/llm/stable-request';
import { BUILT_IN_PRICES, callCost, PriceConfigError, pricesFromEnvironment } from '../src/pricing';
import { prefixChain, SimulatedPromptCache } from '../src/sim/prompt-cache';
import type { SimulatedRequest } from '../src/sim/simulator';
import { sharedTestTools } from './support/agents';
import { batchDirectory, readSink } from './support/batch-files';
import { useTestStack } from './support/suite-stack';
import { uniqueName } from './support/test-stack';

/**
 * The simulator's model at prices chosen to make every bill easy to recompute: $1,000 per million uncached prompt
 * tokens (a thousandth of a dollar each), $250 per million cached ones, $4,000 per million completion tokens. A second
 * model has the same input and output prices and no cached price: its cached tokens must be billed in full.
 */
const RATES = { input: 1000, cached: 250, output: 4000 };
const PRICES = {
  'gpt-4o-mini': { inputPerMillion: RATES.input, outputPerMillion: RATES.output, cachedInputPerMillion: RATES.cached },
  'no-cache-price': { inputPerMillion: RATES.input, outputPerMillion: RATES.output },
};

/** The bill of one request, from the usage the simulator (the provider) reported for it, at the rates above. */
function providerBill(usage: SimulatedRequest['usage'], cachedRate = RATES.cached): number {
  if (usage === undefined) throw new Error('the provider reported no usage');
  const uncached = usage.prompt_tokens - usage.cached_tokens;
  return (uncached * RATES.input + usage.cached_tokens * cachedRate + usage.completion_tokens * RATES.output) / 1e6;
}

/** The same request billed as if nothing were cached. */
const uncachedBill = (usage: SimulatedRequest['usage']) => providerBill(usage, RATES.input);

/** Words enough for a cacheable prefix (the simulator counts whitespace-separated words as tokens). */
const words = (count: number, seed: string) => Array.from({ length: count }, (_, index) => `${seed}${index}`).join(' ');

const suite = useTestStack({
  simulator: { latency: { minMs: 0, maxMs: 0 } },
  worker: (servers) => {
    process.env.FANOUT_TEST_SIM_URL = servers.simulator.baseUrl;
    return {
      tools: sharedTestTools(),
      activities: { prices: pricesFromEnvironment({ FANOUT_PRICES: JSON.stringify(PRICES) }) },
    };
  },
});

/** What the simulator answered for one run (a batch's id, or a run's workflow id and its agents'). */
const requestsOf = (runId: string) =>
  suite.servers.simulator
    .log()
    .filter((request) => request.workflowId === runId || request.workflowId.startsWith(`${runId}/`))
    .filter((request) => request.outcome === 200);

const close = (a: number, b: number) => expect(a).toBeCloseTo(b, 9);

describe('reading and pricing cached tokens', () => {
  it("reads each provider's cache counts into TokenUsage, Anthropic's added back into promptTokens", () => {
    expect(
      usageFromChat({
        prompt_tokens: 2000,
        completion_tokens: 10,
        total_tokens: 2010,
        prompt_tokens_details: { cached_tokens: 1920 },
      }),
    ).toEqual({ promptTokens: 2000, completionTokens: 10, totalTokens: 2010, cachedPromptTokens: 1920 });
    expect(
      usageFromResponses({
        input_tokens: 1500,
        output_tokens: 5,
        total_tokens: 1505,
        input_tokens_details: { cached_tokens: 1024 },
      }),
    ).toEqual({ promptTokens: 1500, completionTokens: 5, totalTokens: 1505, cachedPromptTokens: 1024 });
    expect(
      usageFromAnthropic({
        input_tokens: 50,
        output_tokens: 7,
        cache_read_input_tokens: 3000,
        cache_creation_input_tokens: 600,
        cache_creation: { ephemeral_5m_input_tokens: 200, ephemeral_1h_input_tokens: 400 },
      }),
    ).toEqual({
      promptTokens: 3650,
      completionTokens: 7,
      totalTokens: 3657,
      cachedPromptTokens: 3000,
      cacheWrite5mTokens: 200,
      cacheWrite1hTokens: 400,
    });
    // Without the breakdown, writes are the default 5-minute ones.
    expect(usageFromAnthropic({ input_tokens: 1, output_tokens: 1, cache_creation_input_tokens: 9 })).toMatchObject({
      promptTokens: 10,
      cacheWrite5mTokens: 9,
    });
    // No cache counts reported: none invented.
    expect(usageFromChat({ prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 })).toEqual({
      promptTokens: 5,
      completionTokens: 1,
      totalTokens: 6,
    });
  });

  it("bills cached tokens at the model's listed cached price, and at the full input price where none is listed", () => {
    const usage = { promptTokens: 2000, completionTokens: 100, totalTokens: 2100, cachedPromptTokens: 1024 };
    // gpt-4.1-mini: $0.40 input, $0.10 cached, $1.60 output per million.
    const listed = callCost('gpt-4.1-mini', usage, BUILT_IN_PRICES);
    close(listed?.costUsd ?? NaN, (976 * 0.4 + 1024 * 0.1 + 100 * 1.6) / 1e6);
    close(listed?.cacheSavingsUsd ?? NaN, (1024 * (0.4 - 0.1)) / 1e6);
    // gpt-4-turbo lists no cached price: billed in full, never less.
    const unlisted = callCost('gpt-4-turbo', usage, BUILT_IN_PRICES);
    close(unlisted?.costUsd ?? NaN, (2000 * 10 + 100 * 30) / 1e6);
    expect(unlisted?.cacheSavingsUsd).toBe(0);
    // The batch discount stacks on the cached price.
    close(callCost('gpt-4.1-mini', usage, BUILT_IN_PRICES, 'batch')?.costUsd ?? NaN, (listed?.costUsd ?? NaN) / 2);
  });

  it("bills Anthropic's cache reads at 0.1x input and writes at 1.25x (5 minutes) and 2x (1 hour), halved in a batch", () => {
    const usage = {
      promptTokens: 1000 + 3000 + 200 + 400,
      completionTokens: 10,
      totalTokens: 4610,
      cachedPromptTokens: 3000,
      cacheWrite5mTokens: 200,
      cacheWrite1hTokens: 400,
    };
    // claude-sonnet-4-5: $3 input, $15 output per million.
    const expected = (1000 * 3 + 3000 * 0.3 + 200 * 3.75 + 400 * 6 + 10 * 15) / 1e6;
    close(callCost('claude-sonnet-4-5', usage, BUILT_IN_PRICES)?.costUsd ?? NaN, expected);
    close(callCost('claude-sonnet-4-5', usage, BUILT_IN_PRICES, 'batch')?.costUsd ?? NaN, expected / 2);
    // A price override for a Claude model without cache prices still bills by Anthropic's ratios.
    const override = pricesFromEnvironment({
      FANOUT_PRICES: JSON.stringify({ 'claude-sonnet-4-5': { inputPerMillion: 3, outputPerMillion: 15 } }),
    });
    close(callCost('claude-sonnet-4-5', usage, override)?.costUsd ?? NaN, expected);
  });

  it('refuses a price file whose cached price exceeds its input price, naming the model', () => {
    const bad = JSON.stringify({
      'house-model': { inputPerMillion: 1, outputPerMillion: 2, cachedInputPerMillion: 1.5 },
    });
    expect(() => pricesFromEnvironment({ FANOUT_PRICES: bad })).toThrow(PriceConfigError);
    expect(() => pricesFromEnvironment({ FANOUT_PRICES: bad })).toThrow(
      /FANOUT_PRICES: .*"house-model"\.cachedInputPerMillion: 1\.5 exceeds inputPerMillion \(1\)/,
    );
  });
});

describe('byte-stable requests and prompt_cache_key', () => {
  const tool = (name: string, parameters: object) => ({
    type: 'function' as const,
    function: { name, description: `the ${name} tool`, parameters },
  });

  it('serializes the same tools and messages to the same bytes, whatever their order and key order', () => {
    const one = [
      tool('search', { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] }),
      tool('fetch', { properties: { url: { type: 'string' } }, type: 'object' }),
    ];
    const other = [
      tool('fetch', { type: 'object', properties: { url: { type: 'string' } } }),
      tool('search', { required: ['q'], properties: { q: { type: 'string' } }, type: 'object' }),
    ];
    expect(JSON.stringify(stableTools(one))).toBe(JSON.stringify(stableTools(other)));
    const messages = [
      { role: 'system', content: 'be brief' },
      { content: 'hello', role: 'user' },
    ];
    const reordered = [
      { content: 'be brief', role: 'system' },
      { role: 'user', content: 'hello' },
    ];
    expect(JSON.stringify(stableMessages(messages))).toBe(JSON.stringify(stableMessages(reordered)));
    expect(promptCacheKeyOf(messages, one)).toBe(promptCacheKeyOf(reordered, other));
    // The key follows the stable prefix only: another user prompt keeps it, another system prompt changes it.
    expect(promptCacheKeyOf([messages[0], { role: 'user', content: 'other' }], one)).toBe(
      promptCacheKeyOf(messages, one),
    );
    expect(promptCacheKeyOf([{ role: 'system', content: 'be long' }], one)).not.toBe(promptCacheKeyOf(messages, one));
    expect(promptCacheKeyOf([{ role: 'user', content: 'bare' }], undefined)).toBeUndefined();
  });
});

describe("the simulator's prompt cache", () => {
  const prompt = (count: number) => Array.from({ length: count }, (_, index) => `w${index}`);

  it('caches from 1,024 tokens in 128-token steps, per model and key, until it has been idle too long', () => {
    let idleMs = 1000;
    const cache = new SimulatedPromptCache(() => idleMs);
    const long = prefixChain(prompt(1500));
    expect(prefixChain(prompt(1023))).toEqual([]);
    expect(cache.serve('m', undefined, long, 0)).toBe(0);
    expect(cache.serve('m', undefined, long, 10)).toBe(1408); // 1,024 + 3 x 128 <= 1,500
    expect(cache.serve('m', undefined, prefixChain([...prompt(1200), 'changed', ...prompt(300)]), 20)).toBe(1152);
    expect(cache.serve('m', 'another-key', long, 30)).toBe(0);
    expect(cache.serve('another-model', undefined, long, 40)).toBe(0);
    expect(cache.serve('m', undefined, long, 5000)).toBe(0); // idle for more than a second
    idleMs = 0;
    expect(cache.serve('m', undefined, long, 5000)).toBe(0); // 0 caches nothing
  });
});

describe("the simulator's usage", () => {
  it('reports cached_tokens on chat completions and the Responses API alike, from one cache per model and key', async () => {
    const openai = new OpenAI({ baseURL: suite.servers.simulator.baseUrl, apiKey: 'test-key', maxRetries: 0 });
    const instructions = words(1100, `fanout-responses-${uniqueName('s')}-`);
    const viaResponses = () =>
      openai.responses.create({ model: 'gpt-4o-mini', instructions, input: 'a question', prompt_cache_key: 'k' });
    const first = await viaResponses();
    const second = await viaResponses();
    expect(first.usage?.input_tokens).toBe(1102);
    expect(first.usage?.input_tokens_details.cached_tokens).toBe(0);
    expect(second.usage?.input_tokens_details.cached_tokens).toBe(1024);
    expect(usageFromResponses(second.usage)).toMatchObject({ promptTokens: 1102, cachedPromptTokens: 1024 });
    // The same prompt as a chat completion, same model and key: the prefix the Responses calls cached.
    const chat = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      prompt_cache_key: 'k',
      messages: [
        { role: 'system', content: instructions },
        { role: 'user', content: 'a question' },
      ],
    });
    expect(chat.usage?.prompt_tokens_details?.cached_tokens).toBe(1024);
  });
});

describe('runs priced from what the provider reported', () => {
  it("prices every call of a run at the provider's own usage, cached tokens at the cached price", async () => {
    const system = words(1500, `fanout-system-${uniqueName('s')}-`);
    const workflowId = uniqueName('cached-run');
    // One at a time, so each call after the first finds the prefix the one before it cached.
    const { results, metrics } = await suite.stack.client.runParallel(
      [
        ...Array.from({ length: 4 }, (_, index) => ({ id: `q${index}`, system, prompt: `question ${index}` })),
        ...Array.from({ length: 2 }, (_, index) => ({
          id: `full${index}`,
          system,
          prompt: `question full${index}`,
          model: 'no-cache-price',
        })),
      ],
      { maxParallel: 1 },
      { workflowId },
    );
    expect(results.every((result) => result.status === 'ok')).toBe(true);
    const requests = requestsOf(workflowId);
    expect(requests).toHaveLength(6);
    const byTask = new Map(requests.map((request) => [request.taskId, request]));
    for (const result of results) {
      const usage = byTask.get(result.id)?.usage;
      expect(result.usage?.promptTokens).toBe(usage?.prompt_tokens);
      expect(result.usage?.cachedPromptTokens ?? 0).toBe(usage?.cached_tokens);
      const rate = result.id.startsWith('full') ? RATES.input : RATES.cached;
      close(result.costUsd ?? NaN, providerBill(usage, rate));
      close((result.costUsd ?? NaN) + (result.cacheSavingsUsd ?? 0), uncachedBill(usage));
    }
    // The provider saw 1,502 prompt tokens each time and served 1,408 of them from cache after the first (per model).
    expect(requests.map((request) => request.usage?.cached_tokens)).toEqual([0, 1408, 1408, 1408, 0, 1408]);
    // The model without a cached price was served from cache too, and billed in full.
    expect(results[5].cacheSavingsUsd).toBe(0);
    expect(metrics.tokens.cached).toBe(4 * 1408);
    const rateOf = (request: SimulatedRequest) => (request.taskId.startsWith('full') ? RATES.input : RATES.cached);
    close(
      metrics.cost.usd,
      requests.reduce((sum, request) => sum + providerBill(request.usage, rateOf(request)), 0),
    );
    close(metrics.cost.cacheSavingsUsd ?? NaN, 3 * ((1408 * (RATES.input - RATES.cached)) / 1e6));
  });

  it("sends the task's prompt_cache_key, else one derived from its system prompt, the same for every task sharing it", async () => {
    const system = `a short system prompt ${uniqueName('s')}`;
    const workflowId = uniqueName('cache-keys');
    await suite.stack.client.runParallel(
      [
        { id: 'derived-1', system, prompt: 'one' },
        { id: 'derived-2', system, prompt: 'two' },
        { id: 'own', system, prompt: 'three', promptCacheKey: 'my-key' },
        { id: 'bare', prompt: 'no system prompt' },
      ],
      {},
      { workflowId },
    );
    const keys = new Map(requestsOf(workflowId).map((request) => [request.taskId, request.promptCacheKey]));
    const derived = promptCacheKeyOf([{ role: 'system', content: system }], undefined);
    expect(derived).toMatch(/^fanout-/);
    expect(Object.fromEntries(keys)).toEqual({
      'derived-1': derived,
      'derived-2': derived,
      own: 'my-key',
      bare: undefined,
    });
  });

  it('bills every call in full when the provider reports no cached tokens', async () => {
    suite.servers.simulator.configure({ latency: { minMs: 0, maxMs: 0 }, promptCache: { idleMs: 0 } });
    try {
      const system = words(1500, `fanout-uncached-${uniqueName('s')}-`);
      const workflowId = uniqueName('uncached-run');
      const { results, metrics } = await suite.stack.client.runParallel(
        Array.from({ length: 3 }, (_, index) => ({ id: `q${index}`, system, prompt: `question ${index}` })),
        { maxParallel: 1 },
        { workflowId },
      );
      const requests = requestsOf(workflowId);
      expect(requests.map((request) => request.usage?.cached_tokens)).toEqual([0, 0, 0]);
      for (const result of results) {
        expect(result.usage?.cachedPromptTokens).toBeUndefined();
        expect(result.cacheSavingsUsd).toBeUndefined();
        close(result.costUsd ?? NaN, uncachedBill(requests.find((request) => request.taskId === result.id)?.usage));
      }
      expect(metrics.tokens.cached).toBeUndefined();
      expect(metrics.cost.cacheSavingsUsd).toBeUndefined();
    } finally {
      suite.servers.simulator.configure({ latency: { minMs: 0, maxMs: 0 } });
    }
  });

  it("sends an agent's growing conversation byte-stable, so each step reads what the one before cached", async () => {
    const system = words(1200, `fanout-agent-${uniqueName('s')}-`);
    const workflowId = uniqueName('cached-agent');
    const { results, metrics } = await suite.stack.client.runParallel(
      [{ id: 'digger', system, prompt: 'Dig [[repeat 4 tool:search {"q":"deeper"}]]', tools: ['search'], maxSteps: 5 }],
      {},
      { workflowId },
    );
    expect(results[0].status).toBe('ok');
    const steps = requestsOf(workflowId).filter((request) => request.taskId === 'digger');
    expect(steps).toHaveLength(5);
    // From the second step on, at least the system prompt and tools come from cache.
    expect(steps[0].usage?.cached_tokens).toBe(0);
    for (const step of steps.slice(1)) expect(step.usage?.cached_tokens).toBeGreaterThanOrEqual(1152);
    const billed = steps.reduce((sum, step) => sum + providerBill(step.usage), 0);
    close(results[0].costUsd ?? NaN, billed);
    close(metrics.cost.usd, billed);
    expect(results[0].usage?.cachedPromptTokens).toBe(
      steps.reduce((sum, step) => sum + (step.usage?.cached_tokens ?? 0), 0),
    );
    close(
      results[0].cacheSavingsUsd ?? NaN,
      steps.reduce((sum, step) => sum + uncachedBill(step.usage) - providerBill(step.usage), 0),
    );
  });

  it("prices every line of a batch at the provider's usage, and its summary adds them up", async () => {
    const directory = batchDirectory();
    const systems = [0, 1].map((index) => words(1100, `fanout-batch-${uniqueName('s')}-${index}-`));
    const source = path.join(directory, 'tasks.jsonl');
    const tasks = Array.from({ length: 30 }, (_, index) => ({
      id: `item-${index}`,
      system: systems[index % 2],
      prompt: `question ${index}`,
    }));
    writeFileSync(source, tasks.map((task) => JSON.stringify(task)).join('\n') + '\n');
    const sink = path.join(directory, 'out.jsonl');
    const handle = await suite.stack.client.startBatch({ source, sink, options: { concurrency: 2 } });
    const summary = await handle.result();
    const lines: BatchResultLine[] = readSink(sink);
    expect(lines).toHaveLength(30);
    const requests = requestsOf(handle.batchId);
    expect(requests).toHaveLength(30);
    const byTask = new Map(requests.map((request) => [request.taskId, request]));
    let cached = 0;
    for (const line of lines) {
      const usage = byTask.get(line.id)?.usage;
      expect(line.usage?.cachedPromptTokens ?? 0).toBe(usage?.cached_tokens);
      close(line.costUsd ?? NaN, providerBill(usage));
      cached += usage?.cached_tokens ?? 0;
    }
    // Each system prompt is missed once at most per concurrent lane; the rest is read from cache.
    expect(cached).toBeGreaterThanOrEqual(26 * 1024);
    expect(summary.tokens.cached).toBe(cached);
    close(
      summary.cost?.usd ?? NaN,
      requests.reduce((sum, request) => sum + providerBill(request.usage), 0),
    );
    close(
      summary.cost?.cacheSavingsUsd ?? NaN,
      requests.reduce((sum, request) => sum + uncachedBill(request.usage) - providerBill(request.usage), 0),
    );
  });
});
