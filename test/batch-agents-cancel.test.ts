import path from 'node:path';
import { agentBatchClient, agentWorkerEnvironment, writeJsonl } from './support/batch-agents';
import { batchDirectory, readSink } from './support/batch-files';
import { useWorkerProcesses } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

const suite = useWorkerProcesses({ simulator: { latency: { minMs: 20, maxMs: 20 } } });
const directory = batchDirectory();

it('a cancelled batch leaves no sub-agent call running: the lead waits for every sub-agent of a spawn to end', async () => {
  const { simulator } = suite.servers;
  const { client } = await agentBatchClient(suite, 'review-spawn-cancel');
  // Two sub-agents: one in a tool call a cancel cannot stop (8 s), one in a slow call (20 s) a cancel stops at once.
  const spawn = JSON.stringify({
    tasks: [
      { prompt: 'hold [[tool:stubborn {"ms":8000}]]', tools: ['stubborn'] },
      { prompt: 'wait [[tool:search {"q":"x","ms":20000}]]', tools: ['search'] },
    ],
  });
  const source = writeJsonl(directory, 'review-spawn', [
    { id: 'lead', prompt: `Split [[tool:spawn_agents ${spawn}]]`, tools: ['spawn_agents', 'stubborn', 'search'] },
  ]);
  const sink = path.join(directory, 'review-spawn-out.jsonl');
  const handle = await client.startBatch({ source, sink, options: { concurrency: 1 } });
  const ofBatch = () => simulator.log().filter((request) => request.workflowId.startsWith(handle.batchId));
  await waitFor(
    'both sub-agents in their tool calls',
    () =>
      ofBatch().some((call) => call.taskId === 'tool:stubborn:call_1_1') &&
      ofBatch().some((call) => call.taskId === 'tool:search:call_1_1'),
    { timeoutMs: 60_000 },
  );
  await handle.cancel();
  await expect(handle.result()).rejects.toThrow(/cancelled/);
  // The product's promise: once the batch says it is cancelled, no call of it is still running.
  const open = ofBatch()
    .filter((request) => request.respondedAt === undefined && request.clientClosedAt === undefined)
    .map((request) => request.taskId);

  // Resumed at once: the stubborn sub-agent's work is not dropped (its workflow id may still be running then), and
  // the stubborn call, answered after the cancel, is not sent again.
  const resumed = await client.resumeBatch(handle.batchId);
  const summary = await resumed.result();
  const [line] = readSink(sink);
  const stubbornSent = ofBatch().filter((call) => call.taskId === 'tool:stubborn:call_1_1').length;
  expect({ open, summary: { succeeded: summary.succeeded }, output: line.output, stubbornSent }).toEqual({
    open: [],
    summary: { succeeded: 1 },
    output: expect.stringContaining('{"id":"lead.1-1-1","status":"ok"'),
    stubbornSent: 1,
  });
});

it("a sub-agent that answered before the cancel is counted once in its lead agent's spend over both runs", async () => {
  const { simulator } = suite.servers;
  const { client } = await agentBatchClient(suite, 'review-sub-spend');
  const spawn = JSON.stringify({ tasks: [{ prompt: 'quick part' }, { prompt: 'slow part' }] });
  const lead = { id: 'lead', prompt: `Split [[tool:spawn_agents ${spawn}]]`, tools: ['spawn_agents'] };

  // Control: the same task, never cancelled.
  const control = await client.startBatch({
    source: writeJsonl(directory, 'review-spend-control', [lead]),
    sink: path.join(directory, 'review-spend-control-out.jsonl'),
    options: { concurrency: 1 },
  });
  await control.result();
  const [controlLine] = readSink(path.join(directory, 'review-spend-control-out.jsonl'));

  simulator.configure({ latency: { minMs: 20, maxMs: 20 }, latencyByTask: { 'lead.1-1-2': 120_000 } });
  const sink = path.join(directory, 'review-spend-out.jsonl');
  const handle = await client.startBatch({
    source: writeJsonl(directory, 'review-spend', [lead]),
    sink,
    options: { concurrency: 1 },
  });
  const ofBatch = () => simulator.log().filter((request) => request.workflowId.startsWith(handle.batchId));
  await waitFor(
    'the quick sub-agent answered, the slow one calling',
    () =>
      ofBatch().some((call) => call.taskId === 'lead.1-1-1' && call.respondedAt !== undefined) &&
      ofBatch().some((call) => call.taskId === 'lead.1-1-2'),
    { timeoutMs: 60_000 },
  );
  await handle.cancel();
  await expect(handle.result()).rejects.toThrow(/cancelled/);
  simulator.configure({ latency: { minMs: 20, maxMs: 20 } });
  const resumed = await client.resumeBatch(handle.batchId);
  expect(await resumed.result()).toMatchObject({ total: 1, succeeded: 1 });
  const [line] = readSink(sink);
  // The quick sub-agent ran once (its place returned its answer on the resume)...
  expect(ofBatch().filter((call) => call.taskId === 'lead.1-1-1')).toHaveLength(1);
  // ...so the lead spent what the uncancelled one did: its tokens are not counted twice.
  expect(line.usage?.totalTokens).toBe(controlLine.usage?.totalTokens);
});

it('an agent cancelled while the tool calls of its last step before a continue-as-new answer anyway is still cancelled', async () => {
  const taskQueue = uniqueName('review-can-cancel');
  const { simulator } = suite.servers;
  await suite.spawnWorker(taskQueue, agentWorkerEnvironment(suite.servers.simulator.baseUrl));
  const workflowId = uniqueName('review-can');
  // One step per run (as at a run's 100th step, or once Temporal suggests continue-as-new); each step's call answers
  // 2 s after it is sent whatever happens.
  const handle = await suite.servers.server.client.workflow.start('agent', {
    taskQueue,
    workflowId,
    args: [
      {
        task: { id: 'review-can', prompt: 'Go [[repeat 4 tool:stubborn {"ms":2000}]]', tools: ['stubborn'] },
        inlineOutputBytes: 16_384,
        stepsPerRun: 1,
        place: path.join(directory, 'review-can.agents', 'review-can'),
      },
    ],
  });
  const ofAgent = () => simulator.log().filter((request) => request.workflowId === workflowId);
  await waitFor('the first call sent', () => ofAgent().some((call) => call.taskId === 'tool:stubborn:call_1_1'), {
    timeoutMs: 60_000,
  });
  await handle.cancel();
  const ended = await handle.result().then(
    () => 'completed',
    (error: unknown) => (error instanceof Error ? error.message : String(error)),
  );
  // Cancelled during step 1: no model step after it is sent, and the agent ends cancelled.
  expect({ ended, steps: ofAgent().filter((call) => call.taskId === 'review-can').length }).toEqual({
    ended: expect.stringMatching(/cancel/i),
    steps: 1,
  });
});
