import { spawn } from 'node:child_process';
import { Worker } from '@temporalio/worker';
import { tracedBundleOf } from '../src/telemetry/worker-tracing';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BatchSummary } from '../src/contract/batch';
import type { FanOutResult } from '../src/contract/fan-out';
import type { ProviderBatchResult } from '../src/workflows/provider-batch';
import { batchDirectory, readSink, writeTasks } from './support/batch-files';
import { childWorkflowIds } from './support/history';
import { batchItemSampled } from '../src/telemetry/genai-spans';
import { roundUsd } from '../src/contract/metrics';
import { ancestorsOf, startJaeger, tagOf, type Jaeger, type JaegerSpan, type JaegerTrace } from './support/jaeger';
import { runCli, spawnWorker, type WorkerProcess } from './support/processes';
import { FanoutClient } from '../src/client/fanout-client';
import { modelCalls } from './support/agents';
import { QUICK_LOST_WORKER_DETECTION, simulatorEnvironment, useTestServers } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

// Workers and the caller run as processes of their own, as in production: OpenTelemetry's OTLP exporter loads
// node:http through a dynamic import, which jest's module sandbox refuses.
const TOOLS = path.join(__dirname, 'support', 'agent-tools.js');
const CALLER = path.join(__dirname, 'support', 'traced-caller.js');
const workers: WorkerProcess[] = [];
let jaeger: Jaeger | undefined;
const suite = useTestServers({
  beforeStop: async () => {
    for (const worker of workers) await worker.stop();
    await jaeger?.stop();
  },
});
beforeAll(async () => {
  jaeger = await startJaeger();
});

/** OTEL_* of a process that exports to the test's Jaeger as `service`, and runs agents against the simulator. */
function tracedEnvironment(service: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...simulatorEnvironment(suite.servers.simulator),
    FANOUT_TEST_SIM_URL: suite.servers.simulator.baseUrl,
    OTEL_EXPORTER_OTLP_ENDPOINT: (jaeger as Jaeger).otlpEndpoint,
    OTEL_SERVICE_NAME: service,
    OTEL_BSP_SCHEDULE_DELAY: '200',
    ...extra,
  };
}

/** A traced `fanout worker` process on a fresh task queue. */
async function tracedWorker(service: string, extra: Record<string, string> = {}): Promise<string> {
  const taskQueue = uniqueName('tq-traced');
  await tracedWorkerOn(taskQueue, service, extra);
  return taskQueue;
}

/** A traced `fanout worker` process on `taskQueue`. */
async function tracedWorkerOn(
  taskQueue: string,
  service: string,
  extra: Record<string, string> = {},
): Promise<WorkerProcess> {
  const worker = await spawnWorker({
    address: suite.servers.server.address,
    taskQueue,
    env: tracedEnvironment(service, extra),
    args: ['--tools', TOOLS],
  });
  workers.push(worker);
  return worker;
}

/** Runs tasks from a traced caller process (its own span around the start) and returns what the run reported. */
function runAsCaller(
  taskQueue: string,
  service: string,
  tasks: unknown[],
): Promise<{ workflowId: string; result: FanOutResult }> {
  return runCaller([taskQueue, JSON.stringify(tasks)], service);
}

/** Runs the traced caller process with `args` after the server's address and returns what it printed. */
function runCaller<T>(args: string[], service: string): Promise<{ workflowId: string; result: T }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CALLER, suite.servers.server.address, ...args], {
      env: { ...process.env, ...tracedEnvironment(service) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (code) =>
      code === 0 ? resolve(JSON.parse(stdout)) : reject(new Error(`caller exited ${code}: ${stderr}`)),
    );
  });
}

/** The trace of `service` that `predicate` picks, once Jaeger holds it whole. */
function traceWith(service: string, predicate: (trace: JaegerTrace) => boolean): Promise<JaegerTrace> {
  return waitFor("the run's trace in Jaeger", async () => (await (jaeger as Jaeger).traces(service)).find(predicate), {
    timeoutMs: 60_000,
  });
}

const named = (trace: JaegerTrace, name: string) => trace.spans.filter((span) => span.operationName === name);
const tagged = (spans: JaegerSpan[], key: string, value: unknown) => spans.filter((span) => tagOf(span, key) === value);
const sum = (spans: JaegerSpan[], key: string) =>
  spans.reduce((total, span) => total + Number(tagOf(span, key) ?? 0), 0);

it("exports a run's whole trace to Jaeger: the caller's span, the run, its agents, their model and tool calls and a sub-agent under the call that spawned it", async () => {
  const service = uniqueName('fanout-worker');
  const callerService = uniqueName('caller');
  const taskQueue = await tracedWorker(service);
  const marker = randomUUID();
  const dig = JSON.stringify({ tasks: [{ prompt: `dig ${marker} [[tool:search {"q":"deep"}]]`, tools: ['search'] }] });
  const tasks = [
    { id: 'plain', prompt: `answer ${marker}` },
    { id: 'lead', prompt: `Delegate ${marker} [[tool:spawn_agents ${dig}]]`, tools: ['spawn_agents', 'search'] },
  ];
  // The caller's own span (in its own service): the run's trace goes on under it.
  const { workflowId, result } = await runAsCaller(taskQueue, callerService, tasks);
  const { results, metrics } = result;
  expect(results.map((result) => [result.id, result.status])).toEqual([
    ['plain', 'ok'],
    ['lead', 'ok'],
  ]);

  const run = await traceWith(
    service,
    (candidate) =>
      named(candidate, 'caller request').length === 1 &&
      tagged(named(candidate, 'execute_tool search'), 'gen_ai.tool.name', 'search').length === 1 &&
      named(candidate, 'RunWorkflow:fanOut').length === 1 &&
      candidate.spans.filter((span) => span.operationName.startsWith('invoke_agent')).length === 2 &&
      candidate.spans.filter((span) => span.operationName.startsWith('chat ')).length >= 4,
  );
  const serviceOf = (span: JaegerSpan) => run.processes[span.processID].serviceName;
  expect(serviceOf(named(run, 'caller request')[0])).toBe(callerService);
  expect(serviceOf(named(run, 'StartWorkflow:fanOut')[0])).toBe(callerService);
  expect(serviceOf(named(run, 'RunWorkflow:fanOut')[0])).toBe(service);
  // Every span once: workflow code replayed (a new workflow task after each activity) sent none again.
  expect(new Set(run.spans.map((span) => span.spanID)).size).toBe(run.spans.length);
  expect(named(run, 'RunWorkflow:fanOut')).toHaveLength(1);
  expect(named(run, 'StartWorkflow:fanOut')).toHaveLength(1);

  const one = (name: string) => {
    const spans = named(run, name);
    expect([name, spans.length]).toEqual([name, 1]);
    return spans[0];
  };
  const path = (span: JaegerSpan) => [span.operationName, ...ancestorsOf(run, span)];
  const runPath = ['RunWorkflow:fanOut', 'StartWorkflow:fanOut', 'caller request'];

  // The plain task: its model call under its activity, under the run.
  const plainChat = run.spans.filter(
    (span) => span.operationName.startsWith('chat ') && tagOf(span, 'fanout.task_id') === 'plain',
  );
  expect(plainChat).toHaveLength(1);
  expect(path(plainChat[0])).toEqual([
    plainChat[0].operationName,
    'RunActivity:callAgent',
    'StartActivity:callAgent',
    ...runPath,
  ]);

  // The lead agent, its steps' model calls, the spawn and the sub-agent below it, the sub-agent's tool call.
  const lead = one('invoke_agent lead');
  const leadPath = ['invoke_agent lead', 'RunWorkflow:agent', 'StartChildWorkflow:agent', ...runPath];
  expect(path(lead)).toEqual(leadPath);
  const spawn = one('execute_tool spawn_agents');
  expect(path(spawn)).toEqual(['execute_tool spawn_agents', ...leadPath]);
  const sub = run.spans.find(
    (span) => span.operationName.startsWith('invoke_agent ') && span.operationName !== 'invoke_agent lead',
  ) as JaegerSpan;
  const subPath = [sub.operationName, 'RunWorkflow:agent', 'StartChildWorkflow:agent', ...path(spawn)];
  expect(path(sub)).toEqual(subPath);
  const search = one('execute_tool search');
  expect(path(search)).toEqual(['execute_tool search', 'RunActivity:toolCall', 'StartActivity:toolCall', ...subPath]);
  expect(tagOf(search, 'gen_ai.operation.name')).toBe('execute_tool');
  expect(tagOf(search, 'gen_ai.tool.type')).toBe('function');
  expect(typeof tagOf(search, 'gen_ai.tool.call.id')).toBe('string');

  const leadChats = run.spans.filter(
    (span) => span.operationName.startsWith('chat ') && ancestorsOf(run, span)[2] === 'invoke_agent lead',
  );
  const subChats = run.spans.filter(
    (span) => span.operationName.startsWith('chat ') && ancestorsOf(run, span)[2] === sub.operationName,
  );
  expect(leadChats.length).toBeGreaterThanOrEqual(2);
  expect(subChats.length).toBeGreaterThanOrEqual(2);
  for (const chat of [...leadChats, ...subChats])
    expect(ancestorsOf(run, chat).slice(0, 2)).toEqual(['RunActivity:agentStep', 'StartActivity:agentStep']);

  // Each model call as the GenAI conventions name it.
  const chats = [...plainChat, ...leadChats, ...subChats];
  for (const chat of chats) {
    const model = tagOf(chat, 'gen_ai.request.model');
    expect(chat.operationName).toBe(`chat ${model}`);
    expect(tagOf(chat, 'gen_ai.operation.name')).toBe('chat');
    expect(tagOf(chat, 'gen_ai.provider.name')).toBe('openai');
    expect(tagOf(chat, 'server.address')).toBe('127.0.0.1');
    expect(tagOf(chat, 'gen_ai.response.model')).toEqual(expect.any(String));
    expect(tagOf(chat, 'gen_ai.response.id')).toEqual(expect.any(String));
    expect(String(tagOf(chat, 'gen_ai.response.finish_reasons'))).toMatch(/stop|tool_calls/);
    expect(tagOf(chat, 'gen_ai.usage.input_tokens')).toBeGreaterThan(0);
    expect(tagOf(chat, 'gen_ai.usage.output_tokens')).toBeGreaterThan(0);
    expect(tagOf(chat, 'fanout.cost_usd')).toBeGreaterThan(0);
    expect(tagOf(chat, 'fanout.attempt')).toBe(1);
    expect(String(tagOf(chat, 'fanout.run_id'))).toContain(workflowId);
    expect(chat.tags.find((tag) => tag.key === 'otel.status_code')?.value).not.toBe('ERROR');
  }

  // The figures the spans carry are the run's: tokens and dollars, per task and in all.
  const plain = results.find((result) => result.id === 'plain');
  expect([tagOf(plainChat[0], 'gen_ai.usage.input_tokens'), tagOf(plainChat[0], 'gen_ai.usage.output_tokens')]).toEqual(
    [plain?.usage?.promptTokens, plain?.usage?.completionTokens],
  );
  expect(tagOf(plainChat[0], 'fanout.cost_usd')).toBe(plain?.costUsd);
  const leadResult = results.find((result) => result.id === 'lead');
  expect(tagOf(lead, 'gen_ai.usage.input_tokens')).toBe(leadResult?.usage?.promptTokens);
  expect(tagOf(lead, 'gen_ai.usage.output_tokens')).toBe(leadResult?.usage?.completionTokens);
  expect(tagOf(lead, 'fanout.cost_usd')).toBe(leadResult?.costUsd);
  expect(sum([...leadChats, ...subChats], 'gen_ai.usage.input_tokens')).toBe(leadResult?.usage?.promptTokens);
  expect(sum(chats, 'gen_ai.usage.input_tokens')).toBe(metrics.tokens.prompt);
  expect(sum(chats, 'gen_ai.usage.output_tokens')).toBe(metrics.tokens.completion);
  expect(roundUsd(sum(chats, 'fanout.cost_usd'))).toBe(metrics.cost.usd);

  // No prompt or answer text without the opt-in.
  expect(JSON.stringify(run.spans)).not.toContain(marker);
  expect(chats.every((chat) => tagOf(chat, 'gen_ai.input.messages') === undefined)).toBe(true);
});

it('records prompts and answers in the chat span only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true', async () => {
  const service = uniqueName('fanout-captured');
  const taskQueue = await tracedWorker(service, { OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' });
  const marker = randomUUID();
  const { result } = await runAsCaller(taskQueue, uniqueName('caller'), [
    { id: 'told', prompt: `tell me about ${marker}` },
    { id: 'searcher', prompt: `look ${marker} [[tool:search {"q":"${marker}"}]]`, tools: ['search'] },
  ]);
  expect(result.metrics.failed).toBe(0);
  const run = await traceWith(
    service,
    (candidate) =>
      candidate.spans.some((span) =>
        String(tagOf(span, 'gen_ai.input.messages') ?? '').includes(`tell me about ${marker}`),
      ) && named(candidate, 'execute_tool search').length === 1,
  );
  const told = run.spans.find(
    (span) => span.operationName.startsWith('chat ') && tagOf(span, 'fanout.task_id') === 'told',
  ) as JaegerSpan;
  expect(JSON.parse(String(tagOf(told, 'gen_ai.input.messages')))).toEqual([
    { role: 'user', parts: [{ type: 'text', content: `tell me about ${marker}` }] },
  ]);
  const answer = JSON.parse(String(tagOf(told, 'gen_ai.output.messages'))) as { role: string; finish_reason: string }[];
  expect(answer).toEqual([expect.objectContaining({ role: 'assistant', finish_reason: 'stop' })]);
  const search = named(run, 'execute_tool search')[0];
  expect(String(tagOf(search, 'gen_ai.tool.call.arguments'))).toContain(marker);
  expect(String(tagOf(search, 'gen_ai.tool.call.result'))).toContain(`search found: ${marker}`);
});

it("traces a batch's windows and lanes, and the model calls of the items its ratio samples by id", async () => {
  const service = uniqueName('fanout-batch');
  const ratio = { FANOUT_OTEL_BATCH_ITEM_RATIO: '0.1' };
  const taskQueue = await tracedWorker(service, ratio);
  const directory = mkdtempSync(path.join(tmpdir(), 'fanout-traced-batch-'));
  const source = path.join(directory, 'tasks.jsonl');
  const ids = Array.from({ length: 120 }, (_, index) => `item-${index}`);
  writeFileSync(source, `${ids.map((id) => JSON.stringify({ id, prompt: `question ${id}` })).join('\n')}\n`);
  const { workflowId, result } = await runCaller<BatchSummary>(
    [taskQueue, 'batch', source, path.join(directory, 'out.jsonl')],
    uniqueName('caller'),
  );
  rmSync(directory, { recursive: true, force: true });
  expect(result.succeeded).toBe(120);
  const sampled = ids.filter((id) => batchItemSampled(id, ratio));
  expect(sampled.length).toBeGreaterThan(0);
  expect(sampled.length).toBeLessThan(40);
  const chatsOf = (trace: JaegerTrace) => trace.spans.filter((span) => span.operationName.startsWith('chat '));
  const run = await traceWith(
    service,
    (candidate) => named(candidate, 'RunWorkflow:batch').length === 1 && chatsOf(candidate).length >= sampled.length,
  );
  // Exactly the sampled items' calls, each under its lane, under its window, under the batch.
  const chats = chatsOf(run);
  expect(chats.map((span) => tagOf(span, 'fanout.task_id')).sort()).toEqual([...sampled].sort());
  for (const chat of chats) {
    expect(tagOf(chat, 'fanout.run_id')).toBe(workflowId);
    expect(ancestorsOf(run, chat).slice(0, 2)).toEqual(['RunActivity:runBatchLane', 'RunWorkflow:batchWindow']);
    expect(ancestorsOf(run, chat)).toContain('RunWorkflow:batch');
  }
  // Every lane traced: as many lane spans as the windows ran lanes, each under a window.
  const lanes = named(run, 'RunActivity:runBatchLane');
  expect(lanes.length).toBeGreaterThan(0);
  for (const lane of lanes) expect(ancestorsOf(run, lane)[0]).toBe('RunWorkflow:batchWindow');
});

it("replays a traced worker's batch (stripes lending, windows handing over) on the untraced workflow code and the traced", async () => {
  // A worker restarted with tracing turned off (or on) carries on the runs the other started: the traced interceptors
  // settle every promise workflow code awaits when the untraced code does, so both make the same commands.
  const taskQueue = await tracedWorker(uniqueName('fanout-traced-replay'));
  const { server } = suite.servers;
  const directory = batchDirectory();
  try {
    // Two stripes (concurrency 4, two calls a window): the first's calls are short and it runs out of items first, and
    // lends its calls to the second, whose windows hand over a page each (as the batch-stripes-lent fixture).
    const source = writeTasks(directory, 24, (index) => `item ${index} [sim latency=${index < 12 ? 20 : 300}]`, 'lent');
    const client = await FanoutClient.connect({ client: server.client, taskQueue });
    const batchId = uniqueName('traced-lent');
    const handle = await client.startBatch({
      source,
      sink: path.join(directory, 'lent.out.jsonl'),
      batchId,
      options: { concurrency: 4, windowCalls: 2, pageSize: 3, pagesPerRun: 1, itemsPerActivity: 2 },
    });
    expect((await handle.result()).succeeded).toBe(24);
    const batch = await handle.workflow.fetchHistory();
    const windowIds = childWorkflowIds(batch);
    const signalled = (batch.events ?? []).map(
      (event) => event.signalExternalWorkflowExecutionInitiatedEventAttributes?.signalName,
    );
    expect({
      windows: windowIds.length >= 4,
      lent: signalled.includes('slotsLent'),
      freed: signalled.includes('slotsFreed'),
    }).toEqual({ windows: true, lent: true, freed: true });
    const histories = [
      { workflowId: handle.workflow.workflowId, history: batch },
      ...(await Promise.all(
        windowIds.map(async (workflowId) => ({
          workflowId,
          history: await server.client.workflow.getHandle(workflowId).fetchHistory(),
        })),
      )),
    ];
    const bundle = process.env.FANOUT_WORKFLOW_BUNDLE as string;
    for (const codePath of [bundle, tracedBundleOf(bundle) as string]) {
      const failed: string[] = [];
      for await (const result of Worker.runReplayHistories({ workflowBundle: { codePath } }, histories))
        if (result.error) failed.push(`${result.workflowId}: ${result.error.name}: ${result.error.message}`);
      expect({ codePath, failed }).toEqual({ codePath, failed: [] });
    }
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
});

it('sends nothing and loads no OpenTelemetry SDK when no OTEL_* variable is set: a worker and the CLI', async () => {
  const directory = mkdtempSync(path.join(tmpdir(), 'fanout-untraced-'));
  const record = path.join(directory, 'otlp.jsonl');
  const taskQueue = uniqueName('tq-untraced');
  // No OTEL_* at all (this process sets none; a developer's shell might).
  for (const name of Object.keys(process.env)) if (name.startsWith('OTEL_')) delete process.env[name];
  const env = {
    ...simulatorEnvironment(suite.servers.simulator),
    FANOUT_TEST_SIM_URL: suite.servers.simulator.baseUrl,
    FANOUT_TEST_OTLP_RECORD: record,
    NODE_OPTIONS: `--require ${path.join(__dirname, 'support', 'otlp-request-recorder.js')}`,
  };
  const worker = await spawnWorker({
    address: suite.servers.server.address,
    taskQueue,
    env,
    args: ['--tools', TOOLS],
  });
  let workflowId: string | undefined;
  try {
    const tasks = path.join(directory, 'tasks.json');
    writeFileSync(
      tasks,
      JSON.stringify([{ id: 'untraced', prompt: 'look [[tool:search {"q":"x"}]]', tools: ['search'] }]),
    );
    const cli = await runCli(
      ['run', tasks, '--address', suite.servers.server.address, '--task-queue', taskQueue, '--json'],
      env,
    );
    expect([cli.code, cli.stderr]).toEqual([0, expect.any(String)]);
    workflowId = (JSON.parse(cli.stdout) as { workflowId: string }).workflowId;
  } finally {
    await worker.stop();
  }
  // Two worker processes (the supervisor and its heap-capped child) and the CLI: none sent an export or loaded the SDK.
  const processes = readFileSync(record, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { sent: string[]; sdkModules: number });
  rmSync(directory, { recursive: true, force: true });
  expect(processes.length).toBeGreaterThanOrEqual(2);
  expect(processes.map(({ sent, sdkModules }) => ({ sent, sdkModules }))).toEqual(
    processes.map(() => ({ sent: [], sdkModules: 0 })),
  );
  // And the run's history carries no trace context: no span was started for it anywhere.
  const history = await suite.servers.server.client.workflow.getHandle(workflowId as string).fetchHistory();
  expect(JSON.stringify(history)).not.toContain('_tracer-data');
});

it("traces a SIGKILLed worker's attempt: its chat span ends with WorkerLost, the retry's follows it, and no workflow span comes twice", async () => {
  const service = uniqueName('fanout-crash');
  const taskQueue = uniqueName('tq-traced-crash');
  const { server, simulator } = suite.servers;
  const slowChats = (trace: JaegerTrace) =>
    trace.spans.filter((span) => span.operationName.startsWith('chat ') && tagOf(span, 'fanout.task_id') === 'slow');
  const first = await tracedWorkerOn(taskQueue, service, QUICK_LOST_WORKER_DETECTION);
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const handle = await client.startParallel([{ id: 'slow', prompt: 'Think long [sim latency=6000]' }]);
  await waitFor('the call to be in flight', () => modelCalls(simulator, 'slow').length === 1);
  await first.kill();
  await tracedWorkerOn(taskQueue, service, QUICK_LOST_WORKER_DETECTION);
  const { results } = await handle.result();
  expect(results[0].status).toBe('ok');
  // The simulator saw the call twice: the attempt in flight at the kill, and its retry; nothing more.
  expect(modelCalls(simulator, 'slow')).toHaveLength(2);

  const run = await traceWith(
    service,
    (candidate) =>
      candidate.spans.some((span) => span.operationName === 'RunWorkflow:fanOut') && slowChats(candidate).length === 2,
  );
  const chats = slowChats(run).sort((a, b) => a.startTime - b.startTime);
  const [lost, retry] = chats;
  expect([tagOf(lost, 'fanout.attempt'), tagOf(lost, 'error.type'), tagOf(lost, 'otel.status_code')]).toEqual([
    1,
    'WorkerLost',
    'ERROR',
  ]);
  expect(String(tagOf(lost, 'fanout.worker'))).not.toBe('');
  expect([tagOf(retry, 'fanout.attempt'), tagOf(retry, 'error.type')]).toEqual([2, undefined]);
  // The lost attempt ends before its retry starts (Jaeger's times are microseconds).
  expect(lost.startTime + lost.duration).toBeLessThanOrEqual(retry.startTime);
  // The second worker replayed the run's workflow code: it sent none of its spans again.
  expect(named(run, 'RunWorkflow:fanOut')).toHaveLength(1);
  expect(named(run, 'StartActivity:callAgent')).toHaveLength(1);
});

it("makes no span for a query: a watched agent's trace holds its work, not each look at it", async () => {
  // The SDK's interceptor makes a HandleQuery span per query of a run that has handled an update (here the approval);
  // `fanout status` queries the agent at each look.
  const service = uniqueName('fanout-watched');
  const taskQueue = await tracedWorker(service);
  const { server, simulator } = suite.servers;
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const handle = await client.startParallel([
    { id: 'watched', prompt: 'Ship [[tool:publish {"title":"Report"}]] [sim latency=1500]', tools: ['publish'] },
  ]);
  const connection = ['--address', server.address];
  const child = `${handle.workflowId}/agent:watched`;
  await waitFor('the agent to wait for approval', async () =>
    (await runCli(['status', child, ...connection])).stdout.includes('waiting for approval: call_1_1'),
  );
  expect((await runCli(['approve', child, 'call_1_1', ...connection])).code).toBe(0);
  // Its answer's model call takes 1.5 s: looks at the agent meanwhile.
  await waitFor('the second model call', () => modelCalls(simulator, 'watched').length === 2);
  for (let look = 0; look < 3; look += 1) expect((await runCli(['status', child, ...connection])).code).toBe(0);
  expect((await handle.result()).results[0].status).toBe('ok');
  await traceWith(service, (candidate) => named(candidate, 'RunWorkflow:fanOut').length === 1);
  // Every trace of the worker's service: a query made without a caller's span would be a trace of its own.
  const spans = (await (jaeger as Jaeger).traces(service)).flatMap((trace) => trace.spans);
  expect(spans.some((span) => span.operationName === 'HandleUpdate:approve')).toBe(true);
  expect(
    spans.filter((span) => span.operationName.startsWith('HandleQuery')).map((span) => span.operationName),
  ).toEqual([]);
});

it('traces each wait for approval as await_approval {tool}, from the ask to the answer, with its outcome', async () => {
  const service = uniqueName('fanout-approval');
  const taskQueue = await tracedWorker(service);
  const { server } = suite.servers;
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const handle = await client.startParallel([
    { id: 'shipper', prompt: 'Ship [[tool:publish {"title":"Report"}]]', tools: ['publish'] },
    { id: 'held', prompt: 'Ship [[tool:publish {"title":"Draft"}]]', tools: ['publish'] },
  ]);
  const connection = ['--address', server.address];
  const answer = async (agent: string, ...how: string[]) => {
    const child = `${handle.workflowId}/agent:${agent}`;
    await waitFor(`${agent} to wait for approval`, async () => {
      const status = await runCli(['status', child, ...connection]);
      return status.stdout.includes('waiting for approval: call_1_1');
    });
    const answered = await runCli(['approve', child, 'call_1_1', ...how, ...connection]);
    expect(answered.code).toBe(0);
  };
  await answer('shipper');
  await answer('held', '--deny', 'not yet');
  const { results } = await handle.result();
  expect(results.map((result) => result.status)).toEqual(['ok', 'ok']);

  const run = await traceWith(service, (candidate) => named(candidate, 'await_approval publish').length === 2);
  const waits = named(run, 'await_approval publish');
  const byTask = new Map(waits.map((span) => [tagOf(span, 'fanout.task_id'), span]));
  expect([...byTask.keys()].sort()).toEqual(['held', 'shipper']);
  const shipped = byTask.get('shipper') as JaegerSpan;
  const held = byTask.get('held') as JaegerSpan;
  expect([tagOf(shipped, 'fanout.approval.outcome'), tagOf(held, 'fanout.approval.outcome')]).toEqual([
    'approved',
    'denied',
  ]);
  expect([tagOf(shipped, 'gen_ai.tool.name'), tagOf(shipped, 'gen_ai.tool.call.id')]).toEqual(['publish', 'call_1_1']);
  // The wait lasted until the answer: the held agent was answered after the shipper, so its wait is the longer one.
  expect(held.duration).toBeGreaterThan(shipped.duration);
  expect(ancestorsOf(run, shipped)[0]).toBe('RunActivity:toolCall');
});

it('traces a provider batch as provider_batch {model}: from submission to collection, its outcome, counts and tokens', async () => {
  const service = uniqueName('fanout-provider-batch');
  const taskQueue = await tracedWorker(service);
  const { server, simulator } = suite.servers;
  simulator.configure({ providerBatches: { speed: 1000, processingSeconds: { min: 1, max: 2 } } });
  const directory = batchDirectory();
  const source = path.join(directory, 'tasks.jsonl');
  const tasks = Array.from({ length: 6 }, (_, index) => ({ id: `pb-${index}`, prompt: `item ${index}` }));
  writeFileSync(source, tasks.map((task) => JSON.stringify(task)).join('\n') + '\n');
  const batchId = uniqueName('pb-traced');
  try {
    const handle = await server.client.workflow.start('providerBatch', {
      taskQueue,
      workflowId: batchId,
      args: [{ batchId, source, spool: path.join(directory, 'spool'), options: { pollIntervalMs: 300 } }],
    });
    const result = (await handle.result()) as ProviderBatchResult;
    const lines = result.segments.flatMap((segment) => readSink(segment));
    expect(lines.filter((line) => line.status === 'ok')).toHaveLength(6);

    const run = await traceWith(service, (candidate) =>
      candidate.spans.some((span) => span.operationName.startsWith('provider_batch ')),
    );
    const [batch] = run.spans.filter((span) => span.operationName.startsWith('provider_batch '));
    expect(
      ['fanout.provider_batch.outcome', 'fanout.provider_batch.requests', 'fanout.provider_batch.succeeded'].map(
        (key) => tagOf(batch, key),
      ),
    ).toEqual(['ended', 6, 6]);
    expect(String(tagOf(batch, 'fanout.provider_batch.id'))).not.toBe('');
    expect(tagOf(batch, 'gen_ai.usage.input_tokens')).toBe(
      lines.reduce((total, line) => total + (line.usage?.promptTokens ?? 0), 0),
    );
    expect(ancestorsOf(run, batch)[0]).toBe('RunActivity:collectProviderBatch');
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
});

it('fanout demo --trace starts a Jaeger, traces the demo into it and prints the span tree it reads back', async () => {
  const { code, stdout, stderr } = await runCli(['demo', '--trace'], { OPENAI_API_KEY: '' });
  expect({ code, stderr: code === 0 ? '' : stderr }).toEqual({ code: 0, stderr: '' });
  const tree = stdout.slice(stdout.indexOf('\nTrace '));
  const api = /\(Jaeger API (http:\/\/127\.0\.0\.1:\d+)\/api\/traces\/[0-9a-f]{32}\)/.exec(tree);
  expect(api).not.toBeNull();
  const lines = tree.split('\n').slice(2);
  expect(lines.slice(0, 3).map((line) => line.trim().split('  ')[0])).toEqual([
    'fanout demo',
    'StartWorkflow:fanOut',
    'RunWorkflow:fanOut',
  ]);
  // One model call per demo agent, each under its activity, with its task, tokens and cost.
  const chats = lines.filter((line) => line.trim().startsWith('chat '));
  expect(chats.map((line) => /task=(\S+)/.exec(line)?.[1]).sort()).toEqual([
    'analyst',
    'coder',
    'editor',
    'fact-checker',
    'researcher',
  ]);
  for (const chat of chats)
    expect(chat).toMatch(/^ {10}chat \S+ .* in=\d+ out=\d+ (cached=\d+ )?\$=[\d.e-]+ attempt=1$/);
  // The Jaeger the demo started is gone with it.
  await expect(fetch(`${(api as RegExpExecArray)[1]}/api/services`)).rejects.toThrow();
});

it('loses no span to a collector that takes more than a second to answer, and a stopped worker exits without waiting on it', async () => {
  // An OTLP/JSON collector that answers each export 1.5 s after it came, and keeps only those whose sender waited for
  // the answer: a collector drops a request its client hung up on (Phoenix on a loaded machine took 1.0-1.03 s, and the
  // run's last spans were lost when the worker gave up on an export after 1 s).
  const kept: string[] = [];
  let abandoned = 0;
  const collector = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      setTimeout(() => {
        if (request.socket.destroyed) {
          abandoned += 1;
          return;
        }
        const body = JSON.parse(Buffer.concat(chunks).toString()) as {
          resourceSpans?: { scopeSpans?: { spans?: { name: string }[] }[] }[];
        };
        for (const resource of body.resourceSpans ?? [])
          for (const scope of resource.scopeSpans ?? []) for (const span of scope.spans ?? []) kept.push(span.name);
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end('{}');
      }, 1500);
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  const endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
  const taskQueue = uniqueName('tq-slow-collector');
  const worker = await spawnWorker({
    address: suite.servers.server.address,
    taskQueue,
    env: {
      ...simulatorEnvironment(suite.servers.simulator),
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'slow-collector',
      OTEL_BSP_SCHEDULE_DELAY: '200',
    },
  });
  try {
    const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
    const { results } = await client.runParallel([{ id: 'slow-collector', prompt: 'hello' }]);
    expect(results[0].status).toBe('ok');
    await waitFor("the run's last span at the collector", () => kept.includes('RunWorkflow:fanOut'), {
      timeoutMs: 30_000,
    });
    expect(kept.filter((name) => name.startsWith('chat '))).toHaveLength(1);
    expect(abandoned).toBe(0);
    // The collector now gone, an export may be retrying a refused connection (for up to 10 s): the worker's stop does
    // not wait for it (its flush is bounded by FANOUT_OTEL_FLUSH_MS, then the process exits).
    collector.closeAllConnections();
    await new Promise((resolve) => collector.close(resolve));
    await client.runParallel([{ id: 'collector-gone', prompt: 'hello' }]);
    const stopping = Date.now();
    await worker.stop();
    // Measured at load 12: 1.06 s; without the exit 8.9 s (the retry's timers held the process).
    expect(Date.now() - stopping).toBeLessThan(5000);
    expect(worker.child.exitCode).toBe(0);
  } finally {
    await worker.stop();
    collector.closeAllConnections();
    collector.close();
  }
});
