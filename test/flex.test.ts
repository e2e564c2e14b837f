import type { ChatCallOptions, ChatDependencies } from '../src/llm/send-chat';
import { sendTaskChat } from '../src/llm/send-task-chat';
import { createLlmClient } from '../src/llm/llm-client';
import type { AgentCallResult } from '../src/contract/agent-call';
import type { AgentTask } from '../src/contract/agent-task';
import { RATE_LIMIT_WAIT_MS } from '../src/contract/run-option-defaults';
import { BUILT_IN_PRICES, priceOf, withCost } from '../src/pricing';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { activityEnvironment } from './support/activity-environment';

let simulator: Simulator;
let dependencies: ChatDependencies;

beforeAll(async () => {
  simulator = await startSimulator({ latency: { minMs: 10, maxMs: 10 } });
  dependencies = {
    llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'test-key' }),
    defaultModel: 'gpt-4o-mini',
    clock: () => performance.now(),
    heartbeatIntervalMs: 500,
  };
});

afterAll(async () => {
  await simulator?.close();
});

beforeEach(() => simulator.reset());

/** One call as an activity would make it, with a minute for the request and the usual rate-limit wait budget. */
function call(task: AgentTask, options: ChatCallOptions): Promise<AgentCallResult> {
  const environment = activityEnvironment({ startToCloseTimeoutMs: 60_000 + RATE_LIMIT_WAIT_MS });
  return environment.run(() => sendTaskChat(task, dependencies, options));
}

it('sends a flex call with service_tier "flex" and prices it at the flex price', async () => {
  const result = await call({ id: 'flex-1', prompt: 'summarise this' }, { serviceTier: 'flex' });
  expect(result.serviceTier).toBe('flex');
  const priced = withCost(result, BUILT_IN_PRICES);
  expect(priced.costUsd).toBe(priceOf('gpt-4o-mini', result.usage, BUILT_IN_PRICES, 'flex'));
  expect(priced.costUsd).toBeCloseTo((priceOf('gpt-4o-mini', result.usage, BUILT_IN_PRICES) ?? 0) / 2, 12);
});

it('waits out 429 resource_unavailable with backoff and sends the flex call again within the same attempt', async () => {
  const result = await call({ id: 'flex-busy', prompt: 'busy [sim flex-busy=2]' }, { serviceTier: 'flex' });
  expect(result).toMatchObject({ serviceTier: 'flex', attempt: 1 });
  expect(simulator.log().map((request) => request.outcome)).toEqual([429, 429, 200]);
});

it('falls back to the standard tier once the deadline is near, however busy flex still is', async () => {
  const startedAt = Date.now();
  const result = await call(
    { id: 'flex-late', prompt: 'late [sim flex-busy=1000]' },
    { serviceTier: 'flex', standardTierFromMs: startedAt + 1500 },
  );
  expect(result.serviceTier).toBe('default');
  const log = simulator.log();
  expect(log.at(-1)?.outcome).toBe(200);
  expect(log.slice(0, -1).every((request) => request.outcome === 429)).toBe(true);
  expect(log.at(-1)?.arrivedAt).toBeGreaterThanOrEqual(startedAt + 1500);
  // Priced at the tier that served it.
  expect(withCost(result, BUILT_IN_PRICES).costUsd).toBe(priceOf('gpt-4o-mini', result.usage, BUILT_IN_PRICES));
});

it('leaves standard calls alone: no service_tier, never refused for flex capacity', async () => {
  const result = await call({ id: 'standard', prompt: 'plain [sim flex-busy=5]' }, {});
  expect(result.serviceTier).toBe('default');
  expect(simulator.log().map((request) => request.outcome)).toEqual([200]);
});

it('calls the Responses API when asked, and reads its answer and usage like a chat completion', async () => {
  const result = await call(
    { id: 'responses', system: 'a terse analyst', prompt: 'what changed?', maxTokens: 50 },
    { api: 'responses' },
  );
  expect(result.output).toBe('[simulated] as "a terse analyst" answer to: what changed?');
  expect(result.usage).toEqual({ promptTokens: 5, completionTokens: 9, totalTokens: 14 });
  expect(result.finishReason).toBe('stop');
  expect(simulator.log()).toHaveLength(1);
});

it('sends a flex call through the Responses API too', async () => {
  const result = await call(
    { id: 'responses-flex', prompt: 'busy [sim flex-busy=1]' },
    { api: 'responses', serviceTier: 'flex' },
  );
  expect(result.serviceTier).toBe('flex');
  expect(simulator.log().map((request) => request.outcome)).toEqual([429, 200]);
});
