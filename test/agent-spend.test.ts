import type { AgentResult } from '../src/contract/agent-task';
import { roundUsd } from '../src/contract/metrics';
import { agentProgressQuery, approveUpdate } from '../src/workflows/agent/messages';
import { modelCalls, toolCalls, useAgentStack } from './support/agents';
import { waitFor } from './support/wait-for';

const suite = useAgentStack();

/** What an agent reports it spent (its query answers after it closed too). */
const spendOf = (runId: string, taskId: string) =>
  suite.stack.client.client.workflow.getHandle(`${runId}/agent:${taskId}`).query(agentProgressQuery);

const titled = { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] };

it("adds what a failed agent and an agent stopped by its step budget spent to the run's totals", async () => {
  const handle = await suite.stack.client.startParallel([
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
  expect(
    modelCalls(suite.servers.simulator, 'stubborn').filter((call) => call.workflowId.startsWith(handle.workflowId)),
  ).toHaveLength(2);
  expect(
    modelCalls(suite.servers.simulator, 'looper').filter((call) => call.workflowId.startsWith(handle.workflowId)),
  ).toHaveLength(2);

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
  const handle = await suite.stack.client.startParallel(
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
  expect(
    modelCalls(suite.servers.simulator, 'next').filter((call) => call.workflowId.startsWith(handle.workflowId)),
  ).toHaveLength(0);
});

it("adds what agents cancelled by the run's budget had spent, their sub-agents' included, to the run's totals", async () => {
  const dig = JSON.stringify({
    tasks: [{ prompt: 'dig [[tool:search {"q":"forever","ms":60000}]]', tools: ['search'] }],
  });
  const handle = await suite.stack.client.startParallel(
    [
      // 3,000 words of prompt: its first step alone spends the run's budget, counted once it ends.
      { id: 'big', prompt: `Check ${'word '.repeat(3000)} [[tool:publish {"title":"Q"}]]`, tools: ['publish'] },
      { id: 'lead', prompt: `Delegate [[tool:spawn_agents ${dig}]]`, tools: ['spawn_agents', 'search'] },
    ],
    { tokenBudget: 1000 },
  );
  const agent = (taskId: string) =>
    suite.stack.client.client.workflow.getHandle(`${handle.workflowId}/agent:${taskId}`);
  const sub = suite.stack.client.client.workflow.getHandle(`${handle.workflowId}/agent:lead/sub-1-1-1`);
  // The lead's sub-agent has taken a step and is in its long tool call; the big agent waits for a person.
  await waitFor('the sub-agent to be in its tool call', async () => {
    const progress = await sub.query(agentProgressQuery).catch(() => undefined);
    return progress?.events.some((event) => event.type === 'tool-call') ? true : undefined;
  });
  const waiting = await waitFor(
    'the big agent to wait for approval',
    async () => (await agent('big').query(agentProgressQuery)).waiting[0],
  );
  // Approved, it ends at its loop's budget check, which stops the run and cancels the lead and its sub-agent.
  await agent('big').executeUpdate(approveUpdate, { args: [{ callId: waiting.callId, approve: true }] });

  const { results, metrics, stoppedBy } = await handle.result();
  expect(stoppedBy).toBe('budget');
  expect(results.map((result) => [result.id, result.status, result.error?.type])).toEqual([
    ['big', 'failed', 'BudgetExhausted'],
    ['lead', 'cancelled', 'BudgetExhausted'],
  ]);
  expect((await sub.describe()).status.name).toBe('CANCELLED');
  expect(
    toolCalls(suite.servers.simulator, 'search').filter((call) => call.workflowId === sub.workflowId)[0].clientClosedAt,
  ).toBeDefined();

  const [lead, dug] = [await agent('lead').query(agentProgressQuery), await sub.query(agentProgressQuery)];
  expect([lead.steps, dug.steps]).toEqual([1, 1]);
  expect(dug.usage.totalTokens).toBeGreaterThan(0);
  // The lead's spend holds its sub-agent's, and the run's result holds the lead's.
  expect(lead.usage.totalTokens).toBeGreaterThan(dug.usage.totalTokens);
  expect([results[1].usage, results[1].costUsd]).toEqual([lead.usage, lead.costUsd]);
  expect(metrics.tokens.total).toBe((results[0].usage?.totalTokens ?? 0) + lead.usage.totalTokens);
  expect(results[0].usage?.totalTokens).toBeGreaterThan(3000);
});
