/**
 * Capture scenarios of the `agent` workflow, and of a fan-out whose task has tools (its agent child), for
 * scripts/capture-histories.ts. The worker loads the test tools (test/support/agent-tools.js, through FANOUT_TOOLS,
 * read when the script creates its worker) so that tool calls and an approval are in the histories.
 */
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import type { TestWorker } from '../test/support/test-stack';
import { waitFor } from '../test/support/wait-for';
import { agentProgressQuery, approveUpdate } from '../src/workflows/agent/messages';

process.env.FANOUT_TOOLS = path.resolve(__dirname, '..', 'test', 'support', 'agent-tools.js');

interface AgentScenario {
  name: string;
  run(stack: TestWorker, id: string): Promise<WorkflowHandle>;
}

function check(condition: boolean, scenario: string, what: string): void {
  if (!condition)
    throw new Error(`scenario ${scenario} did not ${what}; its fixture would not show what its name says`);
}

const startAgent = (stack: TestWorker, workflowId: string, input: Record<string, unknown>) =>
  stack.client.client.workflow.start('agent', {
    taskQueue: stack.taskQueue,
    workflowId,
    args: [{ inlineOutputBytes: 16_384, ...input }],
  });

export const agentScenarios: AgentScenario[] = [
  {
    // Parallel tool calls, a failing tool, two sub-agents, and a call approved by a person.
    name: 'agent-tools',
    async run(stack, workflowId) {
      const spawn = JSON.stringify({
        tasks: [{ prompt: 'sub one' }, { prompt: 'sub two [[tool:search {"q":"s"}]]', tools: ['search'] }],
      });
      const prompt = `Research [[tool:search {"q":"a"}, tool:fetch_page {"url":"b"}, tool:broken {}]] [[tool:spawn_agents ${spawn}]] [[tool:publish {"title":"t"}]]`;
      const handle = await startAgent(stack, workflowId, {
        task: { id: 'researcher', prompt, tools: ['search', 'fetch_page', 'broken', 'spawn_agents', 'publish'] },
      });
      const waiting = await waitFor(
        'the publish call to wait for approval',
        async () => (await handle.query(agentProgressQuery)).waiting[0],
      );
      await handle.executeUpdate(approveUpdate, { args: [{ callId: waiting.callId, approve: true }] });
      const outcome = (await handle.result()) as { status: string; steps: number };
      check(outcome.status === 'ok' && outcome.steps === 4, this.name, 'answer after 4 steps');
      return handle;
    },
  },
  {
    // A structured answer repaired once, a denied approval, and continue-as-new every 2 steps (a chain of runs).
    name: 'agent-continue-as-new',
    async run(stack, workflowId) {
      const output = { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] };
      const prompt =
        'Go [[tool:search {"q":"1"}]] [[tool:publish {"title":"no"}]] [[invalid-json 1]] [[answer-json {"title":"done"}]]';
      const handle = await startAgent(stack, workflowId, {
        task: { id: 'long', prompt, tools: ['search', 'publish'], output },
        stepsPerRun: 2,
      });
      const waiting = await waitFor(
        'the publish call to wait for approval',
        async () => (await handle.query(agentProgressQuery)).waiting[0],
      );
      await handle.executeUpdate(approveUpdate, {
        args: [{ callId: waiting.callId, approve: false, reason: 'not now' }],
      });
      const outcome = (await handle.result()) as { status: string; output: string };
      check(
        outcome.status === 'ok' && outcome.output === '{"title":"done"}',
        this.name,
        'answer with the repaired object',
      );
      return stack.client.client.workflow.getHandle(workflowId);
    },
  },
  {
    name: 'agent-cancelled',
    async run(stack, workflowId) {
      // Every model step of this agent takes a minute: it is cancelled during its first.
      const handle = await startAgent(stack, workflowId, {
        task: { id: 'slow', prompt: 'Wait [sim latency=60000] [[tool:search {"q":"long"}]]', tools: ['search'] },
      });
      await waitFor(
        'the first step to be in flight',
        async () => ((await handle.describe()).raw.pendingActivities?.length ?? 0) > 0,
      );
      await handle.cancel();
      const error = await handle.result().then(
        () => undefined,
        (failure: unknown) => failure,
      );
      check(/cancel/i.test(String((error as { cause?: unknown })?.cause ?? error)), this.name, 'end cancelled');
      return handle;
    },
  },
  {
    // An agent task whose id holds `/` gets a child id with `~` in its place.
    name: 'fanout-agent-slash-id',
    async run(stack, workflowId) {
      const tasks = [{ id: 'team/lead', prompt: 'Use [[tool:search {"q":"x"}]]', tools: ['search'] }];
      const handle = await stack.client.startParallel(tasks, undefined, { workflowId });
      const { results } = await handle.result();
      check(results[0]?.status === 'ok', this.name, 'succeed');
      const child = await stack.client.client.workflow.getHandle(`${workflowId}/agent:team~lead`).describe();
      check(child.status.name === 'COMPLETED', this.name, 'run its agent as agent:team~lead');
      return handle.workflow;
    },
  },
  {
    // A fan-out with a plain task and a task with tools: the plain one an activity, the other an agent child.
    name: 'fanout-agents',
    async run(stack, workflowId) {
      const tasks = [
        { id: 'plain', prompt: 'plain [sim latency=10]' },
        { id: 'agent', prompt: 'Use [[tool:search {"q":"x"}]]', tools: ['search'] },
      ];
      const handle = await stack.client.startParallel(tasks, undefined, { workflowId });
      const { results } = await handle.result();
      check(
        results.every((result) => result.status === 'ok'),
        this.name,
        'succeed',
      );
      return handle.workflow;
    },
  },
  {
    // An agent that fails and one that stops on its step budget; the run counts their spend.
    name: 'fanout-agent-spend',
    async run(stack, workflowId) {
      const output = { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] };
      const tasks = [
        { id: 'stubborn', prompt: 'Report [[invalid-json 5]]', output, outputRepairs: 1 },
        { id: 'looper', prompt: 'Loop [[repeat 5 tool:search {"q":"again"}]]', tools: ['search'], maxSteps: 2 },
      ];
      const handle = await stack.client.startParallel(tasks, undefined, { workflowId });
      const { results, metrics } = await handle.result();
      check(
        results.every((result) => result.status === 'failed') && metrics.tokens.total > 0,
        this.name,
        'fail both agents and count their tokens',
      );
      return handle.workflow;
    },
  },
  {
    // An agent cancelled while its sub-agent is in a tool call; the sub-agent signals its spend.
    // (Its fixture is the sub-agent's, `agent-cancelled-spend.sub-1-1-1`: a parent's fixture replays under the scenario's
    // id, and a parent's children's ids derive from its own.)
    name: 'agent-cancelled-spend',
    async run(stack, workflowId) {
      // The sub-agent waits for a person (a tool call in flight would need the simulator, which this script's tools do not call).
      const dig = JSON.stringify({ tasks: [{ prompt: 'dig [[tool:publish {"title":"d"}]]', tools: ['publish'] }] });
      const handle = await startAgent(stack, workflowId, {
        task: { id: 'lead', prompt: `Delegate [[tool:spawn_agents ${dig}]]`, tools: ['spawn_agents', 'publish'] },
      });
      const sub = stack.client.client.workflow.getHandle(`${workflowId}/sub-1-1-1`);
      await waitFor(
        'the sub-agent to wait for approval',
        async () => (await sub.query(agentProgressQuery).catch(() => undefined))?.waiting[0],
      );
      await handle.cancel();
      await handle.result().catch(() => undefined);
      const lead = await handle.query(agentProgressQuery);
      const dug = await sub.query(agentProgressQuery);
      const cancelled = (await sub.describe()).status.name === 'CANCELLED';
      check(
        cancelled && dug.usage.totalTokens > 0 && lead.usage.totalTokens > dug.usage.totalTokens,
        this.name,
        "cancel the sub-agent and count its tokens in the lead's",
      );
      return handle;
    },
  },
  {
    // The run's budget cancels an agent whose sub-agent is in a tool call; both report their spend.
    name: 'fanout-agent-cancelled-spend',
    async run(stack, workflowId) {
      const dig = JSON.stringify({ tasks: [{ prompt: 'dig [[tool:publish {"title":"d"}]]', tools: ['publish'] }] });
      const tasks = [
        { id: 'big', prompt: `Check ${'word '.repeat(3000)} [[tool:publish {"title":"Q"}]]`, tools: ['publish'] },
        { id: 'lead', prompt: `Delegate [[tool:spawn_agents ${dig}]]`, tools: ['spawn_agents', 'publish'] },
      ];
      const handle = await stack.client.startParallel(tasks, { tokenBudget: 1000 }, { workflowId });
      const workflows = stack.client.client.workflow;
      const sub = workflows.getHandle(`${workflowId}/agent:lead/sub-1-1-1`);
      await waitFor(
        'the sub-agent to wait for approval',
        async () => (await sub.query(agentProgressQuery).catch(() => undefined))?.waiting[0],
      );
      const big = workflows.getHandle(`${workflowId}/agent:big`);
      const waiting = await waitFor(
        'the big agent to wait for approval',
        async () => (await big.query(agentProgressQuery)).waiting[0],
      );
      await big.executeUpdate(approveUpdate, { args: [{ callId: waiting.callId, approve: true }] });
      const { results, stoppedBy } = await handle.result();
      const cancelled = results[1].status === 'cancelled' && (results[1].usage?.totalTokens ?? 0) > 0;
      check(
        stoppedBy === 'budget' && cancelled,
        this.name,
        "stop on the run's budget and count the cancelled lead's tokens",
      );
      return handle.workflow;
    },
  },
];
