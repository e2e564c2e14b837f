import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { FanoutClient } from '../src/client/fanout-client';
import type { AgentTask } from '../src/contract/agent-task';
import { startDevServer, type DevServer } from '../src/local/dev-server';
import { freePort } from '../src/local/free-port';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { agentProgressQuery, approveUpdate } from '../src/workflows/agent/messages';
import { modelCalls, toolCalls } from './support/agents';
import { batchDirectory } from './support/batch-files';
import { spawnWorker, type WorkerProcess } from './support/processes';
import { simulatorEnvironment } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

// The Temporal server goes away while an agent is half-way, and comes back with its history (a file-backed dev server
// on the same port): the worker process lives on through it. Whatever the agent was doing, it must finish with no model
// step and no tool call sent again that had answered before the stop.

let server: DevServer | undefined;
let simulator: Simulator;
let worker: WorkerProcess | undefined;
let connection: Connection;
let client: FanoutClient;
let restartServer: () => Promise<void>;
const taskQueue = uniqueName('agent-restart');

beforeAll(async () => {
  simulator = await startSimulator({ latency: { minMs: 20, maxMs: 20 } });
  const [port, uiPort] = [await freePort(), await freePort()];
  const dbFilename = path.join(batchDirectory(), 'temporal.db');
  server = await startDevServer({ port, uiPort, dbFilename });
  restartServer = async () => {
    await server?.stop();
    server = undefined;
    server = await startDevServer({ port, uiPort, dbFilename });
  };
  worker = await spawnWorker({
    address: server.address,
    taskQueue,
    env: {
      ...simulatorEnvironment(simulator),
      FANOUT_TOOLS: path.join(__dirname, 'support', 'agent-tools.js'),
      FANOUT_TEST_SIM_URL: simulator.baseUrl,
    },
  });
  // The test's own connection, not the server's: it must outlive the server process it first reached.
  connection = await Connection.connect({ address: server.address });
  client = await FanoutClient.connect({ client: new Client({ connection }), taskQueue });
});

afterAll(async () => {
  await worker?.stop();
  await connection?.close();
  await server?.stop();
  await simulator?.close();
});

/** How many times the simulator saw each tool call of the run whose workflow id starts with `runId`. */
function toolCallCounts(runId: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const call of toolCalls(simulator).filter((request) => request.workflowId.startsWith(runId)))
    counts[call.taskId] = (counts[call.taskId] ?? 0) + 1;
  return counts;
}

/** Starts `task` as a run of one agent and returns its handle, the agent's workflow id, and the run's tool calls. */
async function startAgentRun(task: AgentTask) {
  const handle = await client.startParallel([task]);
  const agentId = `${handle.workflowId}/agent:${task.id}`;
  return {
    handle,
    agentId,
    toolCallsNow: () => toolCalls(simulator).filter((call) => call.workflowId.startsWith(agentId)),
  };
}

describe('an agent whose Temporal server stops and starts while a tool call runs', () => {
  it('finishes after the restart, each model step sent once and each answered tool call once', async () => {
    const task = {
      id: 'restart-tool',
      prompt:
        'Dig [[tool:search {"q":"one"}]] [[tool:search {"q":"slow","ms":2500}]] [[tool:fetch_page {"url":"three"}]]',
      tools: ['search', 'fetch_page'],
    };
    const { handle, toolCallsNow } = await startAgentRun(task);
    await waitFor('the slow tool call of step 2 to be in flight', () =>
      toolCallsNow().some((call) => call.taskId === 'tool:search:call_2_1'),
    );
    await restartServer();
    const { results } = await handle.result();

    expect(results[0].status).toBe('ok');
    expect(results[0].output).toContain(
      'from 3 tool results: search found: one | search found: slow | fetch_page found: three',
    );
    expect(modelCalls(simulator, task.id).map((call) => call.attempt)).toEqual([1, 1, 1, 1]);
    const counts = toolCallCounts(handle.workflowId);
    // The one in flight at the stop may have been sent again by its retry; the others had answered, or came after.
    expect(counts['tool:search:call_2_1']).toBeLessThanOrEqual(2);
    expect({ ...counts, 'tool:search:call_2_1': 1 }).toEqual({
      'tool:search:call_1_1': 1,
      'tool:search:call_2_1': 1,
      'tool:fetch_page:call_3_1': 1,
    });
    expect(
      simulator.log().filter((request) => request.respondedAt === undefined && request.clientClosedAt === undefined),
    ).toEqual([]);
  });
});

describe('an agent whose Temporal server stops and starts while a sub-agent runs', () => {
  it('finishes after the restart, the lead and its sub-agent each sending every model step and tool call once', async () => {
    const sub = {
      prompt: 'sub [[tool:search {"q":"near"}]] [[tool:search {"q":"deep","ms":2500}]]',
      tools: ['search'],
    };
    const task = {
      id: 'restart-lead',
      prompt: `Delegate [[tool:spawn_agents ${JSON.stringify({ tasks: [sub] })}]] [[tool:fetch_page {"url":"after"}]]`,
      tools: ['spawn_agents', 'search', 'fetch_page'],
    };
    const { handle, agentId } = await startAgentRun(task);
    const subId = `${agentId}/sub-1-1-1`;
    await waitFor("the sub-agent's slow tool call to be in flight", () =>
      toolCalls(simulator, 'search').some(
        (call) => call.workflowId === subId && call.taskId === 'tool:search:call_2_1',
      ),
    );
    await restartServer();
    const { results } = await handle.result();

    expect(results[0].status).toBe('ok');
    expect(results[0].output).toContain('fetch_page found: after');
    expect(modelCalls(simulator, task.id).map((call) => call.attempt)).toEqual([1, 1, 1]);
    expect(modelCalls(simulator, `${task.id}.1-1-1`).map((call) => call.attempt)).toEqual([1, 1, 1]);
    const counts = toolCallCounts(handle.workflowId);
    expect(counts['tool:search:call_2_1']).toBeLessThanOrEqual(2);
    expect({ ...counts, 'tool:search:call_2_1': 1 }).toEqual({
      'tool:search:call_1_1': 1,
      'tool:search:call_2_1': 1,
      'tool:fetch_page:call_2_1': 1,
    });
  });
});

describe('an agent whose Temporal server stops and starts while an approval waits', () => {
  it('still waits after the restart, takes the approval, and runs the approved call once', async () => {
    const task = {
      id: 'restart-approval',
      prompt: 'Report [[tool:search {"q":"facts"}]] [[tool:publish {"title":"T"}]]',
      tools: ['search', 'publish'],
    };
    const { handle, agentId } = await startAgentRun(task);
    const agent = () => client.client.workflow.getHandle(agentId);
    const waitsForApproval = () =>
      waitFor('the agent to wait for approval of call_2_1', async () => {
        const progress = await agent()
          .query(agentProgressQuery)
          .catch(() => undefined);
        return progress?.waiting.some((call) => call.callId === 'call_2_1') ? true : undefined;
      });
    await waitsForApproval();
    await restartServer();
    await waitsForApproval();
    await agent().executeUpdate(approveUpdate, { args: [{ callId: 'call_2_1', approve: true }] });
    const { results } = await handle.result();

    expect(results[0].status).toBe('ok');
    expect(results[0].output).toContain('publish found: T');
    expect(modelCalls(simulator, task.id).map((call) => call.attempt)).toEqual([1, 1, 1]);
    expect(toolCallCounts(handle.workflowId)).toEqual({ 'tool:search:call_1_1': 1, 'tool:publish:call_2_1': 1 });
  });
});
