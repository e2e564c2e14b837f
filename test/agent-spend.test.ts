import path from 'node:path';
import type { AgentResult } from '../src/contract/agent-task';
import { roundUsd } from '../src/contract/metrics';
import type { Tool } from '../src/tools/define-tool';
import { agentProgressQuery } from '../src/workflows/agent/messages';
import { modelCalls } from './support/agents';
import { startTestServers, startTestWorker, type TestServers, type TestWorker } from './support/test-stack';

let servers: TestServers;
let stack: TestWorker;

beforeAll(async () => {
  servers = await startTestServers({ simulator: { latency: { minMs: 20, maxMs: 20 } } });
  process.env.FANOUT_TEST_SIM_URL = servers.simulator.baseUrl;
  const tools = Object.values(require(path.join(__dirname, 'support', 'agent-tools.js')) as Record<string, Tool>);
  stack = await startTestWorker(servers, { tools });
});

afterAll(async () => {
  await stack?.stop();
  await servers?.stop();
});

/** What an agent reports it spent (its query answers after it closed too). */
const spendOf = (runId: string, taskId: string) => stack.client.client.workflow.getHandle(`${runId}/agent:${taskId}`).query(agentProgressQuery);

const titled = { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] };

it("adds what a failed agent and an agent stopped by its step budget spent to the run's totals", async () => {
  const handle = await stack.client.startParallel([
    { id: 'answers', prompt: 'just answer' },
    { id: 'stubborn', prompt: 'Report [[invalid-json 5]]', output: titled, outputRepairs: 1 },
    { id: 'looper', prompt: 'Loop [[repeat 5 tool:search {"q":"again"}]]', tools: ['search'], maxSteps: 2 },
  ]);
  const { results, metrics } = await handle.result();
  expect(results.map((result) => [result.id, result.status, result.error?.type])).toEqual([
    ['answers', 'ok', undefined],
    ['stubborn', 'failed', 'OutputInvalid'],
    ['looper', 'failed', 'BudgetExhausted'],
  ]);
  expect(modelCalls(servers.simulator, 'stubborn').filter((call) => call.workflowId.startsWith(handle.workflowId))).toHaveLength(2);
  expect(modelCalls(servers.simulator, 'looper').filter((call) => call.workflowId.startsWith(handle.workflowId))).toHaveLength(2);

  for (const id of ['stubborn', 'looper']) {
    const agent = await spendOf(handle.workflowId, id);
    const result = results.find((candidate) => candidate.id === id) as AgentResult;
    expect(agent.steps).toBe(2);
    expect(agent.usage.totalTokens).toBeGreaterThan(0);
    expect(agent.costUsd).toBeGreaterThan(0);
    expect([id, result.usage, result.costUsd]).toEqual([id, agent.usage, agent.costUsd]);
  }
  const tokens = results.reduce((sum, result) => sum + (result.usage?.totalTokens ?? 0), 0);
  const usd = roundUsd(results.reduce((sum, result) => sum + (result.costUsd ?? 0), 0));
  expect(metrics.tokens.total).toBe(tokens);
  expect(metrics.cost.usd).toBe(usd);
  // The run's totals hold more than the one answer's.
  expect(metrics.tokens.total).toBeGreaterThan(results[0].usage?.totalTokens ?? 0);
});

it("counts a failed agent's spend against the run's budget: the next agent is not started", async () => {
  const handle = await stack.client.startParallel(
    [
      { id: 'spends', prompt: 'Report [[invalid-json 5]]', output: titled, outputRepairs: 0 },
      { id: 'next', prompt: 'never sent' },
    ],
    { maxParallel: 1, tokenBudget: 1 },
  );
  const { results, stoppedBy } = await handle.result();
  expect(results.map((result) => [result.id, result.status, result.error?.type])).toEqual([
    ['spends', 'failed', 'OutputInvalid'],
    ['next', 'skipped', 'BudgetExhausted'],
  ]);
  expect(stoppedBy).toBe('budget');
  expect(modelCalls(servers.simulator, 'next').filter((call) => call.workflowId.startsWith(handle.workflowId))).toHaveLength(0);
});
