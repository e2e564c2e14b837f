import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { WorkflowFailedError } from '@temporalio/client';
import { FanoutClient } from '../src/client/fanout-client';
import type { SimulatedRequest } from '../src/sim/simulator';
import { modelCalls, toolCalls } from './support/agents';
import { agentBatchClient, agentWorkerEnvironment, waitForSent, writeJsonl } from './support/batch-agents';
import { batchDirectory, readSink } from './support/batch-files';
import { QUICK_LOST_WORKER_DETECTION, useWorkerProcesses } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

const suite = useWorkerProcesses({
  simulator: { latency: { minMs: 20, maxMs: 20 } },
  env: QUICK_LOST_WORKER_DETECTION,
});
const directory = batchDirectory();

/** How many times each id was sent, of the requests given. */
function timesSent(requests: readonly SimulatedRequest[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const request of requests) counts[request.taskId] = (counts[request.taskId] ?? 0) + 1;
  return counts;
}

/** Three model steps with a tool call each, the second slow (8 s): the point where a test stops the batch. */
const DIG = 'Dig [[tool:search {"q":"one"}]] [[tool:search {"q":"slow","ms":8000}]] [[tool:search {"q":"three"}]]';

it('runs agents in a batch beside single calls: each agent a child workflow, every line in the sink', async () => {
  const { client } = await agentBatchClient(suite, 'batch-agents');
  const source = writeJsonl(directory, 'mixed', [
    { id: 'plain-0', prompt: 'hello' },
    { id: 'agent-0', prompt: 'Look [[tool:search {"q":"a"}]]', tools: ['search'] },
    { id: 'plain-1', prompt: 'hello' },
    {
      id: 'agent-1',
      prompt: 'Look [[tool:search {"q":"b"}, tool:fetch_page {"url":"u"}]]',
      tools: ['search', 'fetch_page'],
    },
    { id: 'plain-2', prompt: 'hello' },
  ]);
  const sink = path.join(directory, 'mixed-out.jsonl');
  const handle = await client.startBatch({ source, sink, options: { concurrency: 3 } });
  const summary = await handle.result();

  expect(summary).toMatchObject({ total: 5, succeeded: 5, failed: 0 });
  const lines = new Map(readSink(sink).map((line) => [line.id, line]));
  expect([...lines.keys()].sort()).toEqual(['agent-0', 'agent-1', 'plain-0', 'plain-1', 'plain-2']);
  expect(lines.get('agent-0')).toMatchObject({ status: 'ok', steps: 2 });
  expect(lines.get('agent-0')?.output).toContain('search found: a');
  expect(lines.get('agent-1')?.output).toContain('search found: b | fetch_page found: u');
  expect(lines.get('agent-1')?.transcriptRef?.uri).toBeDefined();
  expect(lines.get('plain-0')).toMatchObject({ status: 'ok' });
  expect(lines.get('plain-0')?.steps).toBeUndefined();
  // Each model step and tool call once; the agents' calls come from their own workflows, named after the batch.
  expect(modelCalls(suite.servers.simulator, 'agent-1').map((call) => call.attempt)).toEqual([1, 1]);
  expect(modelCalls(suite.servers.simulator, 'agent-1')[0].workflowId).toBe(`${handle.batchId}/agent:agent-1`);
  const tools = toolCalls(suite.servers.simulator).filter((call) => call.workflowId.startsWith(handle.batchId));
  // (Both agents' first calls are `call_1_1`: the simulator numbers them by step and place.)
  expect(timesSent(tools)).toEqual({ 'tool:search:call_1_1': 2, 'tool:fetch_page:call_1_2': 1 });
  // An agent that answered leaves no saved place behind, and the batch removes their directory once it is empty.
  expect(existsSync(`${sink}.agents`)).toBe(false);
});

it('cancelled mid-agent, leaves nothing open; resumed, goes on from each agent place: no answered model step or tool call sent again', async () => {
  const { simulator } = suite.servers;
  const { client } = await agentBatchClient(suite, 'batch-agents-resume');
  // The lead's sub-agent "slow" calls the model for two minutes: the cancel finds it in flight, "quick" answered.
  const spawn = JSON.stringify({ tasks: [{ prompt: 'quick part' }, { prompt: 'slow part' }] });
  simulator.configure({ latency: { minMs: 20, maxMs: 20 }, latencyByTask: { 'lead.1-1-2': 120_000 } });
  const source = writeJsonl(directory, 'resume', [
    { id: 'digger', prompt: DIG, tools: ['search'] },
    {
      id: 'pair',
      prompt:
        'Pair [[tool:search {"q":"one"}]] [[tool:fetch_page {"url":"u"}, tool:search {"q":"slow","ms":8000}]] [[tool:search {"q":"three"}]]',
      tools: ['search', 'fetch_page'],
    },
    { id: 'lead', prompt: `Split [[tool:spawn_agents ${spawn}]]`, tools: ['spawn_agents'] },
    { id: 'plain', prompt: 'hello' },
  ]);
  const sink = path.join(directory, 'resume-out.jsonl');
  const handle = await client.startBatch({ source, sink, options: { concurrency: 4 } });
  const ofBatch = () => simulator.log().filter((request) => request.workflowId.startsWith(handle.batchId));
  const sent = (id: string) => ofBatch().filter((request) => request.taskId === id);

  await waitFor(
    'both slow tool calls, the slow sub-agent, and the answers beside them',
    () =>
      sent('tool:search:call_2_1').length === 1 &&
      sent('tool:search:call_2_2').length === 1 &&
      sent('tool:fetch_page:call_2_1').some((call) => call.respondedAt !== undefined) &&
      sent('lead.1-1-1').some((call) => call.respondedAt !== undefined) &&
      sent('lead.1-1-2').length === 1,
    { timeoutMs: 60_000 },
  );
  await handle.cancel();
  await expect(handle.result()).rejects.toThrow(/cancelled/);
  // Cancelling waited for every agent, sub-agent and activity: nothing of the batch is still open at the simulator.
  expect(
    ofBatch().filter((request) => request.respondedAt === undefined && request.clientClosedAt === undefined),
  ).toEqual([]);
  expect(readSink(sink).map((line) => line.id)).toEqual(['plain']);
  const beforeResume = timesSent(ofBatch());

  simulator.configure({ latency: { minMs: 20, maxMs: 20 } });
  const resumed = await client.resumeBatch(handle.batchId);
  const summary = await resumed.result();
  expect(summary).toMatchObject({ total: 3, succeeded: 3, failed: 0, alreadyOk: 1 });
  const lines = new Map(readSink(sink).map((line) => [line.id, line]));
  expect(lines.get('digger')?.output).toContain('search found: one | search found: slow | search found: three');
  expect(lines.get('pair')?.output).toContain('fetch_page found: u | search found: slow');
  expect(lines.get('lead')).toMatchObject({ status: 'ok', steps: 2 });
  expect(lines.get('digger')).toMatchObject({ status: 'ok', steps: 4 });

  const after = timesSent(ofBatch());
  // Model steps: each agent's steps once over both runs (4, 4 and 2), so none answered before the cancel was sent again.
  expect([after.digger, after.pair, after.lead]).toEqual([4, 4, 2]);
  // Sub-agents: "quick" answered before the cancel and was not run again; "slow" was in flight and ran once more.
  expect([beforeResume['lead.1-1-1'], after['lead.1-1-1']]).toEqual([1, 1]);
  expect([beforeResume['lead.1-1-2'], after['lead.1-1-2']]).toEqual([1, 2]);
  // Tool calls: answered ones once; the two slow ones were in flight at the cancel and sent once more.
  expect(after['tool:search:call_1_1']).toBe(2); // digger's and pair's step 1 (the same call id in both agents)
  expect(after['tool:fetch_page:call_2_1']).toBe(1);
  expect(after['tool:search:call_2_1']).toBe(2);
  expect(after['tool:search:call_2_2']).toBe(2);
  expect(after['tool:search:call_3_1']).toBe(2);
  expect(
    ofBatch().filter((request) => request.respondedAt === undefined && request.clientClosedAt === undefined),
  ).toEqual([]);
});

it('an agent stopped by its step budget is a failed line that keeps its place; resumed with a higher budget, it goes on from its last step', async () => {
  const { client } = await agentBatchClient(suite, 'batch-agents-budget');
  const quick = 'Dig [[tool:search {"q":"one"}]] [[tool:search {"q":"two"}]] [[tool:search {"q":"three"}]]';
  const source = writeJsonl(directory, 'budget', [{ id: 'capped', prompt: quick, tools: ['search'], maxSteps: 2 }]);
  const sink = path.join(directory, 'budget-out.jsonl');
  const handle = await client.startBatch({ source, sink, options: { concurrency: 2 } });
  expect(await handle.result()).toMatchObject({ total: 1, succeeded: 0, failed: 1 });
  const [stopped] = readSink(sink);
  expect(stopped).toMatchObject({ id: 'capped', status: 'failed', steps: 2, error: { type: 'BudgetExhausted' } });
  expect(stopped.transcriptRef?.uri).toBeDefined();
  expect(stopped.usage?.totalTokens).toBeGreaterThan(0);
  expect(existsSync(path.join(`${sink}.agents`, 'capped', 'place.json'))).toBe(true);

  writeJsonl(directory, 'budget', [{ id: 'capped', prompt: quick, tools: ['search'], maxSteps: 10 }]);
  const resumed = await client.resumeBatch(handle.batchId);
  expect(await resumed.result()).toMatchObject({ total: 1, succeeded: 1, failed: 0 });
  const [done] = readSink(sink);
  expect(done).toMatchObject({ id: 'capped', status: 'ok', steps: 4 });
  expect(done.output).toContain('search found: one | search found: two | search found: three');
  const sent = suite.servers.simulator.log().filter((request) => request.workflowId.startsWith(handle.batchId));
  // Steps 1 and 2 were paid once, before the stop; the resume took steps 3 and 4 only.
  expect(timesSent(sent).capped).toBe(4);
  expect(existsSync(`${sink}.agents`)).toBe(false);
});

it('completes after its worker is SIGKILLed mid-agent, repeating no finished model step or tool call', async () => {
  const taskQueue = uniqueName('batch-agents-kill');
  const first = await suite.spawnWorker(taskQueue, agentWorkerEnvironment(suite.servers.simulator.baseUrl));
  const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
  const source = writeJsonl(
    directory,
    'kill',
    Array.from({ length: 3 }, (_, index) => ({ id: `dig-${index}`, prompt: DIG, tools: ['search'] })),
  );
  const sink = path.join(directory, 'kill-out.jsonl');
  const handle = await client.startBatch({ source, sink, options: { concurrency: 3 } });
  const ofBatch = () =>
    suite.servers.simulator.log().filter((request) => request.workflowId.startsWith(handle.batchId));
  await waitFor(
    'every agent in its slow tool call',
    () => ofBatch().filter((request) => request.taskId === 'tool:search:call_2_1').length === 3,
    { timeoutMs: 60_000 },
  );
  await first.kill();
  await suite.spawnWorker(taskQueue, agentWorkerEnvironment(suite.servers.simulator.baseUrl));
  const summary = await handle.result();

  expect(summary).toMatchObject({ total: 3, succeeded: 3, failed: 0 });
  const counts = timesSent(ofBatch());
  for (let index = 0; index < 3; index += 1) expect(counts[`dig-${index}`]).toBe(4);
  // Step 1's tool calls had answered (once each, 3 agents); the slow ones were in flight and ran again by their retry.
  expect([counts['tool:search:call_1_1'], counts['tool:search:call_2_1'], counts['tool:search:call_3_1']]).toEqual([
    3, 6, 3,
  ]);
});

it('a batch workflow started directly (not through the client) refuses agents in a provider batch before sending anything', async () => {
  const taskQueue = uniqueName('batch-agents-route');
  await suite.spawnWorker(taskQueue, agentWorkerEnvironment(suite.servers.simulator.baseUrl));
  const source = writeJsonl(directory, 'route', [
    { id: 'plain', prompt: 'hello' },
    { id: 'agent', prompt: 'Look [[tool:search {"q":"a"}]]', tools: ['search'] },
  ]);
  const sink = path.join(directory, 'route-out.jsonl');
  const before = suite.servers.simulator.log().length;
  const batchId = uniqueName('route');
  const handle = await suite.servers.server.client.workflow.start('batch', {
    taskQueue,
    workflowId: batchId,
    args: [{ batchId, source, sink, options: { route: 'provider-batch' } }],
  });
  const failure = await handle.result().then(
    () => undefined,
    (error: unknown) => error as WorkflowFailedError,
  );
  expect(failure?.cause?.message).toMatch(/line 2: an agent .* cannot go in a provider batch/);
  expect(suite.servers.simulator.log().length).toBe(before);
});

it('cancelled while one tool call waits for approval and one is still answering: keeps that answer, and the resume does not send it again', async () => {
  const { client } = await agentBatchClient(suite, 'batch-agents-settle');
  const source = writeJsonl(directory, 'settle', [
    {
      id: 'careful',
      prompt: 'Careful [[tool:stubborn {"ms":3000}, tool:publish {"title":"t"}]]',
      tools: ['stubborn', 'publish'],
    },
  ]);
  const sink = path.join(directory, 'settle-out.jsonl');
  const handle = await client.startBatch({ source, sink, options: { concurrency: 1 } });
  const ofBatch = () =>
    suite.servers.simulator.log().filter((request) => request.workflowId.startsWith(handle.batchId));
  await waitForSent(suite.servers.simulator, handle.batchId, 'tool:stubborn:call_1_1');
  await handle.cancel();
  await expect(handle.result()).rejects.toThrow(/cancelled/);
  // The cancel waited for the call that would not stop: it answered, and nothing is open.
  expect(ofBatch().filter((call) => call.taskId === 'tool:stubborn:call_1_1')[0].respondedAt).toBeDefined();
  expect(ofBatch().filter((call) => call.respondedAt === undefined && call.clientClosedAt === undefined)).toEqual([]);

  const resumed = await client.resumeBatch(handle.batchId);
  const agent = suite.servers.server.client.workflow.getHandle(`${handle.batchId}/agent:careful`);
  await waitFor(
    'the publish call waiting again',
    async () =>
      (await agent.describe()).status.name === 'RUNNING' &&
      (await agent.query<{ waiting: unknown[] }>('agentProgress').catch(() => ({ waiting: [] }))).waiting.length > 0,
    { timeoutMs: 60_000 },
  );
  await agent.executeUpdate('approve', { args: [{ callId: 'call_1_2', approve: true }] });
  expect(await resumed.result()).toMatchObject({ total: 1, succeeded: 1, failed: 0 });
  expect(readSink(sink)[0].output).toContain('stubborn found: done | publish found: t');
  const counts = timesSent(ofBatch());
  // The answer that came in after the cancel was kept in the agent's place: sent once over both runs.
  expect([counts['tool:stubborn:call_1_1'], counts['tool:publish:call_1_2'], counts.careful]).toEqual([1, 1, 2]);
});

it('an agent cancelled on its own (not by its batch) is a failed Cancelled line, and the batch goes on', async () => {
  const { client } = await agentBatchClient(suite, 'batch-agents-alone');
  const source = writeJsonl(directory, 'alone', [
    { id: 'alone', prompt: DIG, tools: ['search'] },
    { id: 'plain', prompt: 'hello' },
  ]);
  const sink = path.join(directory, 'alone-out.jsonl');
  const handle = await client.startBatch({ source, sink, options: { concurrency: 2 } });
  const ofBatch = () =>
    suite.servers.simulator.log().filter((request) => request.workflowId.startsWith(handle.batchId));
  await waitForSent(suite.servers.simulator, handle.batchId, 'tool:search:call_2_1');
  await suite.servers.server.client.workflow.getHandle(`${handle.batchId}/agent:alone`).cancel();
  expect(await handle.result()).toMatchObject({ total: 2, succeeded: 1, failed: 1 });
  const lines = new Map(readSink(sink).map((line) => [line.id, line]));
  expect(lines.get('alone')).toMatchObject({ status: 'failed', error: { type: 'Cancelled' } });
  expect(lines.get('plain')).toMatchObject({ status: 'ok' });
  expect(ofBatch().filter((call) => call.respondedAt === undefined && call.clientClosedAt === undefined)).toEqual([]);
});

it('a place saved for another task is not gone on from, and one that cannot be read fails its line naming it', async () => {
  const { client } = await agentBatchClient(suite, 'batch-agents-places');
  const quick = 'Dig [[tool:search {"q":"one"}]] [[tool:search {"q":"two"}]]';
  const source = writeJsonl(directory, 'places', [
    { id: 'edited', prompt: quick, tools: ['search'], maxSteps: 1 },
    { id: 'broken', prompt: quick, tools: ['search'], maxSteps: 1 },
  ]);
  const sink = path.join(directory, 'places-out.jsonl');
  const handle = await client.startBatch({ source, sink, options: { concurrency: 2 } });
  expect(await handle.result()).toMatchObject({ total: 2, succeeded: 0, failed: 2 });
  const brokenPlace = path.join(`${sink}.agents`, 'broken', 'place.json');
  writeFileSync(brokenPlace, '{"state": ');
  writeJsonl(directory, 'places', [
    { id: 'edited', prompt: 'Look again [[tool:search {"q":"other"}]]', tools: ['search'], maxSteps: 10 },
    { id: 'broken', prompt: quick, tools: ['search'], maxSteps: 10 },
  ]);
  const resumed = await client.resumeBatch(handle.batchId);
  expect(await resumed.result()).toMatchObject({ total: 2, succeeded: 1, failed: 1 });
  const lines = new Map(readSink(sink).map((line) => [line.id, line]));
  // The edited task started from its first step (its old place was of another prompt).
  expect(lines.get('edited')).toMatchObject({ status: 'ok', steps: 2 });
  expect(lines.get('edited')?.output).toContain('search found: other');
  expect(lines.get('broken')).toMatchObject({ status: 'failed', error: { type: 'InvalidInput' } });
  expect(lines.get('broken')?.error?.message).toContain(brokenPlace);
  const counts = timesSent(
    suite.servers.simulator.log().filter((request) => request.workflowId.startsWith(handle.batchId)),
  );
  // One step each before the stop; the edited one two more; the broken one nothing more (its place was not read).
  expect([counts.edited, counts.broken]).toEqual([3, 1]);
  expect(existsSync(brokenPlace)).toBe(true);
});
