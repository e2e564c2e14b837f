/**
 * Captures one history per scenario of every workflow type into test/fixtures/histories/, for test/replay.test.ts.
 *
 *   npm run fixtures:capture                         # every scenario; refuses to overwrite an existing fixture
 *   npm run fixtures:capture -- --only batch-small   # some scenarios (comma-separated names)
 *   npm run fixtures:capture -- --label v0-3-0       # writes <name>.v0-3-0.json beside the last release's
 *   npm run fixtures:capture -- --force              # replaces existing fixtures of the same names
 *
 * It starts its own dev server, simulator and worker (workflows bundled from src/, not dist/, so the fixtures are of
 * the code in the tree). Each scenario runs under the workflow id that is its name: the replay test passes the file
 * name up to its first dot back as the workflow id. Fixtures are kept per release, labelled with its version
 * (CONTRIBUTING.md, "Replay fixtures"): a release's are captured beside the last release's, never over them.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { WorkflowHandle } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import type { AgentTask } from '../src/contract/agent-task';
import { writeTasks } from '../test/support/batch-files';
import { historyToJson } from '../test/support/history-json';
import { startTestServers, startTestWorker, type TestWorker } from '../test/support/test-stack';
import { waitFor } from '../test/support/wait-for';
import { agentScenarios } from './agent-scenarios';
import { agentProgressQuery } from '../src/workflows/agent/messages';
import type { SimulatorConfigInput } from '../src/sim/config';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import type {
  ProviderBatchInput,
  ProviderBatchProgress,
  ProviderBatchResult,
  ProviderBatchRouteOptions,
} from '../src/workflows/provider-batch';

const FIXTURES = path.resolve(__dirname, '..', 'test', 'fixtures', 'histories');

/** A scenario starts its workflow under `id`, drives it to a close and checks it ended the way its name says. */
interface Scenario {
  name: string;
  run(stack: TestWorker, id: string, directory: string): Promise<WorkflowHandle>;
}

/** A mistake in how the script was run, or a scenario that ended otherwise than planned: its message says it all. */
class CaptureError extends Error {}

const task = (id: string, sim: string): AgentTask => ({ id, prompt: `${id} [sim ${sim}]` });

function expectThat(condition: boolean, scenario: string, what: string): void {
  if (!condition)
    throw new CaptureError(`scenario ${scenario} did not ${what}; its fixture would not show what its name says`);
}

async function outcomeOf(promise: Promise<unknown>): Promise<{ value?: unknown; error?: unknown }> {
  return promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
}

const isCancelled = (error: unknown): boolean => /cancel/i.test(String((error as { cause?: unknown })?.cause ?? error));

const scenarios: Scenario[] = [
  {
    name: 'fanout-ok',
    async run(stack, workflowId) {
      const handle = await stack.client.startParallel(
        [task('a', 'latency=30'), task('b', 'latency=10'), task('c', 'latency=20')],
        undefined,
        { workflowId },
      );
      const { results } = await handle.result();
      expectThat(
        results.every((result) => result.status === 'ok'),
        this.name,
        'succeed',
      );
      return handle.workflow;
    },
  },
  {
    name: 'fanout-fail-fast',
    async run(stack, workflowId) {
      const tasks = [
        task('denied', 'fault=403 latency=200'),
        task('long', 'latency=60000'),
        task('queued', 'latency=10'),
      ];
      const handle = await stack.client.startParallel(
        tasks,
        { errorPolicy: 'fail-fast', maxParallel: 2 },
        { workflowId },
      );
      const result = await handle.result();
      expectThat(result.stoppedBy === 'fail-fast', this.name, 'stop by fail-fast');
      return handle.workflow;
    },
  },
  {
    name: 'fanout-cancelled',
    async run(stack, workflowId) {
      const handle = await stack.client.startParallel(
        [task('quick', 'latency=20'), task('long-1', 'latency=60000'), task('long-2', 'latency=60000')],
        undefined,
        {
          workflowId,
        },
      );
      await waitFor('the quick task to finish and two to be in flight', async () => {
        const progress = await handle.progress();
        return progress.done === 1 && progress.running === 2;
      });
      await handle.cancel();
      const { error } = await outcomeOf(handle.result());
      expectThat(isCancelled(error), this.name, 'end cancelled');
      return handle.workflow;
    },
  },
  {
    name: 'dag-continue',
    async run(stack, workflowId) {
      const handle = await stack.client.startDag(
        [
          { ...task('bad', 'fault=401'), dependsOn: [] },
          { ...task('child', 'latency=10'), dependsOn: ['bad'] },
          { ...task('root', 'latency=20'), dependsOn: [] },
          { id: 'follow', prompt: 'Use: {{deps.root}} [sim latency=10]', dependsOn: ['root'] },
        ],
        { errorPolicy: 'continue' },
        { workflowId },
      );
      const { results } = await handle.result();
      expectThat(
        results.map((result) => result.status).join() === 'failed,skipped,ok,ok',
        this.name,
        'fail one node and skip only its child',
      );
      return handle.workflow;
    },
  },
  {
    name: 'fanout-fan-in',
    async run(stack, workflowId) {
      const handle = await stack.client.startFanOutFanIn(
        [task('left', 'latency=20'), task('right', 'latency=10')],
        { prompt: 'Combine.' },
        undefined,
        {
          workflowId,
        },
      );
      const result = await handle.result();
      expectThat(result.synthesis.status === 'ok', this.name, 'synthesise');
      return handle.workflow;
    },
  },
  {
    name: 'batch-small',
    async run(stack, batchId, directory) {
      const source = writeTasks(directory, 5, (index) => `item ${index} [sim latency=20]`, 'small');
      const handle = await stack.client.startBatch({
        source,
        sink: path.join(directory, 'small.out.jsonl'),
        batchId,
        options: { concurrency: 2 },
      });
      const summary = await handle.result();
      expectThat(summary.succeeded === 5 && summary.runs === 1, this.name, 'run 5 items in one run');
      return handle.workflow;
    },
  },
  {
    name: 'batch-hand-over',
    async run(stack, batchId, directory) {
      // Two pages per window: the batch runs in three windows, each handing over to the next with calls still in flight.
      const source = writeTasks(
        directory,
        12,
        (index) =>
          `item ${index} [sim latency=${index % 3 === 0 ? 400 : 20}${index === 7 ? ' fault=500 times=1' : ''}]`,
        'chain',
      );
      const handle = await stack.client.startBatch({
        source,
        sink: path.join(directory, 'chain.out.jsonl'),
        batchId,
        options: { concurrency: 3, pageSize: 2, pagesPerRun: 2, itemsPerActivity: 2 },
      });
      const summary = await handle.result();
      expectThat(summary.succeeded === 12 && summary.runs >= 3, this.name, 'run 12 items over at least 3 windows');
      return handle.workflow;
    },
  },
  {
    name: 'batch-stripes-lent',
    async run(stack, batchId, directory) {
      // Two stripes (concurrency 4, two calls a window): the first's calls are short and it runs out of items first; its
      // two calls are lent to the second, whose windows hand over (a page each) and pass them on.
      const source = writeTasks(
        directory,
        24,
        (index) => `item ${index} [sim latency=${index < 12 ? 20 : 300}]`,
        'lent',
      );
      const handle = await stack.client.startBatch({
        source,
        sink: path.join(directory, 'lent.out.jsonl'),
        batchId,
        options: { concurrency: 4, windowCalls: 2, pageSize: 3, pagesPerRun: 1, itemsPerActivity: 2 },
      });
      const summary = await handle.result();
      const history = await handle.workflow.fetchHistory();
      const lent = (history.events ?? []).some(
        (event) => event.signalExternalWorkflowExecutionInitiatedEventAttributes?.signalName === 'slotsLent',
      );
      expectThat(summary.succeeded === 24 && summary.runs >= 4 && lent, this.name, "lend a stripe's calls on");
      return handle.workflow;
    },
  },
  {
    name: 'batch-cancelled',
    async run(stack, batchId, directory) {
      const source = writeTasks(
        directory,
        5,
        (index) => `item ${index} [sim latency=${index < 2 ? 20 : 60000}]`,
        'cancel',
      );
      const handle = await stack.client.startBatch({
        source,
        sink: path.join(directory, 'cancel.out.jsonl'),
        batchId,
        options: { concurrency: 3 },
      });
      await waitFor('two items done and one in flight', async () => {
        const progress = await handle.progress();
        return progress.done === 2 && progress.inFlight >= 1;
      });
      await handle.cancel();
      const { error } = await outcomeOf(handle.result());
      expectThat(isCancelled(error), this.name, 'end cancelled');
      return handle.workflow;
    },
  },
  {
    name: 'batch-fail-fast',
    async run(stack, batchId, directory) {
      const sims = ['latency=20', 'fault=403 latency=200', 'latency=60000', 'latency=10', 'latency=10'];
      const source = writeTasks(directory, sims.length, (index) => `item ${index} [sim ${sims[index]}]`, 'failfast');
      const handle = await stack.client.startBatch({
        source,
        sink: path.join(directory, 'failfast.out.jsonl'),
        batchId,
        options: { concurrency: 3, errorPolicy: 'fail-fast' },
      });
      const summary = await handle.result();
      expectThat(
        summary.stoppedBy === 'fail-fast' && summary.failed === 1 && summary.notRun > 0,
        this.name,
        'stop by fail-fast with items not run',
      );
      return handle.workflow;
    },
  },
  {
    // Agents in a batch: a plain item beside two agents (parallel tool calls; sub-agents), each saving its place.
    name: 'batch-agents',
    async run(stack, batchId, directory) {
      const spawn = JSON.stringify({ tasks: [{ prompt: 'sub one' }, { prompt: 'sub two' }] });
      const source = writeJsonl(directory, 'agents', [
        { id: 'plain', prompt: 'hello' },
        {
          id: 'a1',
          prompt: 'Look [[tool:search {"q":"a"}, tool:fetch_page {"url":"b"}]]',
          tools: ['search', 'fetch_page'],
        },
        { id: 'a2', prompt: `Split [[tool:spawn_agents ${spawn}]]`, tools: ['spawn_agents'] },
      ]);
      const handle = await stack.client.startBatch({
        source,
        sink: path.join(directory, 'agents.out.jsonl'),
        batchId,
        options: { concurrency: 3 },
      });
      const summary = await handle.result();
      expectThat(summary.succeeded === 3, this.name, 'answer the plain item and both agents');
      return handle.workflow;
    },
  },
  {
    // In a window: an agent item whose id holds `/` gets a child id with `~` in its place.
    name: 'batch-agent-slash-id',
    async run(stack, batchId, directory) {
      const source = writeJsonl(directory, 'agent-slash', [
        { id: 'team/lead', prompt: 'Look [[tool:search {"q":"a"}]]', tools: ['search'] },
      ]);
      const handle = await stack.client.startBatch({
        source,
        sink: path.join(directory, 'agent-slash.out.jsonl'),
        batchId,
        options: { concurrency: 2 },
      });
      const summary = await handle.result();
      expectThat(summary.succeeded === 1, this.name, 'answer the agent item');
      const child = await stack.client.client.workflow.getHandle(`${batchId}/agent:team~lead`).describe();
      expectThat(child.status.name === 'COMPLETED', this.name, 'run its agent as agent:team~lead');
      return handle.workflow;
    },
  },
  {
    // Cancelled while an agent's tool call waits for approval: the agent saves its place (the step's other result kept).
    name: 'batch-agents-cancelled',
    async run(stack, batchId, directory) {
      const source = writeJsonl(directory, 'agents-cancel', [
        {
          id: 'a1',
          prompt: 'Dig [[tool:search {"q":"a"}, tool:publish {"title":"t"}]]',
          tools: ['search', 'publish'],
        },
      ]);
      const handle = await stack.client.startBatch({
        source,
        sink: path.join(directory, 'agents-cancel.out.jsonl'),
        batchId,
        options: { concurrency: 2 },
      });
      const agent = stack.client.client.workflow.getHandle(`${batchId}/agent:a1`);
      await waitFor('the publish call to wait for approval', async () =>
        (await agent.query(agentProgressQuery).catch(() => undefined))?.waiting.length === 1 ? true : undefined,
      );
      await handle.cancel();
      const { error } = await outcomeOf(handle.result());
      expectThat(isCancelled(error), this.name, 'end cancelled');
      return handle.workflow;
    },
  },
  ...agentScenarios,
  ...providerBatchScenarios(),
];

function writeJsonl(directory: string, name: string, tasks: object[]): string {
  const file = path.join(directory, `${name}.jsonl`);
  writeFileSync(file, `${tasks.map((line) => JSON.stringify(line)).join('\n')}\n`);
  return file;
}

/**
 * The provider-batch route: one answered part, one part with an expired item sent again in a second round and then
 * handed back (its retry file joined), a run that continues as new every two polls, two Anthropic parts created one at a
 * time, and a run cancelled while its batches run (cancel, collect, rethrow). Their provider batches go to a simulator
 * of their own, which the worker's batch clients reach through OPENAI_BASE_URL and ANTHROPIC_BASE_URL (read when the
 * first of them is made).
 */
function providerBatchScenarios(): Scenario[] {
  let simulator: Promise<Simulator> | undefined;
  const batchSimulator = async (config: SimulatorConfigInput): Promise<Simulator> => {
    simulator ??= startSimulator(config).then((started) => {
      process.env.OPENAI_BASE_URL = started.baseUrl;
      process.env.OPENAI_API_KEY = 'fixtures';
      process.env.ANTHROPIC_BASE_URL = started.baseUrl.replace(/\/v1$/, '');
      process.env.ANTHROPIC_API_KEY = 'fixtures';
      return started;
    });
    const started = await simulator;
    started.configure(config);
    started.reset();
    return started;
  };
  const start = async (
    stack: TestWorker,
    workflowId: string,
    directory: string,
    count: number,
    prompt: (index: number) => string,
    options: ProviderBatchRouteOptions,
  ) => {
    const source = writeTasks(directory, count, prompt, workflowId);
    const input: ProviderBatchInput = {
      batchId: workflowId,
      source,
      spool: path.join(directory, `${workflowId}.spool`),
      options: { pollIntervalMs: 200, maxPollIntervalMs: 500, ...options },
    };
    return stack.client.client.workflow.start('providerBatch', {
      taskQueue: stack.taskQueue,
      workflowId,
      args: [input],
    });
  };
  return [
    {
      name: 'provider-batch',
      async run(stack, workflowId, directory) {
        await batchSimulator({
          providerBatches: { speed: 1000, processingSeconds: { min: 100, max: 300 }, expiresAfterSeconds: 1000 },
        });
        const handle = await start(
          stack,
          workflowId,
          directory,
          6,
          (index) => (index === 4 ? 'late [sim batch=expired]' : `item ${index}`),
          { maxRequestsPerPart: 3 },
        );
        const result = (await handle.result()) as ProviderBatchResult;
        expectThat(
          result.succeeded === 5 && result.retry !== undefined && result.providerBatches.length === 3,
          this.name,
          'answer 5 items in 2 parts, send 1 again in a third, and hand it back',
        );
        return handle;
      },
    },
    {
      name: 'provider-batch-continued',
      async run(stack, workflowId, directory) {
        await batchSimulator({ providerBatches: { speed: 10, processingSeconds: { min: 10, max: 20 } } });
        const handle = await start(stack, workflowId, directory, 4, (index) => `item ${index}`, {
          maxRequestsPerPart: 2,
          maxPollsPerRun: 2,
        });
        const result = (await handle.result()) as ProviderBatchResult;
        expectThat(
          result.succeeded === 4 && (result.runs ?? 0) > 1,
          this.name,
          'answer 4 items in 2 parts over several runs',
        );
        return handle;
      },
    },
    {
      name: 'provider-batch-anthropic',
      async run(stack, workflowId, directory) {
        const started = await batchSimulator({
          providerBatches: { speed: 1000, processingSeconds: { min: 100, max: 300 } },
        });
        const source = path.join(directory, `${workflowId}.jsonl`);
        writeFileSync(
          source,
          Array.from({ length: 4 }, (_, index) =>
            JSON.stringify({ id: `${workflowId}-${index}`, prompt: `item ${index}`, model: 'claude-haiku-4-5' }),
          ).join('\n') + '\n',
        );
        const input: ProviderBatchInput = {
          batchId: workflowId,
          source,
          spool: path.join(directory, `${workflowId}.spool`),
          options: { pollIntervalMs: 200, maxPollIntervalMs: 500, maxRequestsPerPart: 2 },
        };
        const handle = await stack.client.client.workflow.start('providerBatch', {
          taskQueue: stack.taskQueue,
          workflowId,
          args: [input],
        });
        const result = (await handle.result()) as ProviderBatchResult;
        expectThat(
          result.succeeded === 4 && started.batchStats().byProvider.anthropic.batchesCreated === 2,
          this.name,
          'answer 4 items in 2 Anthropic parts',
        );
        return handle;
      },
    },
    {
      name: 'provider-batch-cancelled',
      async run(stack, workflowId, directory) {
        const started = await batchSimulator({
          providerBatches: { speed: 10, processingSeconds: { min: 60, max: 60 } },
        });
        const handle = await start(stack, workflowId, directory, 6, (index) => `item ${index}`, {});
        await waitFor('the provider batch to be created', () => started.batchStats().batchesCreated === 1);
        await waitFor(
          'a poll to see it running',
          async () =>
            (await handle.query<ProviderBatchProgress>('providerBatchProgress')).providerBatches[0]?.status ===
            'in_progress',
        );
        await handle.cancel();
        const { error } = await outcomeOf(handle.result());
        expectThat(
          isCancelled(error) && started.batchStats().cancelled >= 1,
          this.name,
          'end cancelled, its provider batch cancelled',
        );
        await started.close();
        return handle;
      },
    },
  ];
}

/** Every run of the workflow's chain, first to last: from the latest run back along each run's continued-from id. */
async function chainOf(handle: WorkflowHandle): Promise<string[]> {
  const histories: string[] = [];
  let runId: string | undefined;
  do {
    const history = await handle.client.getHandle(handle.workflowId, runId).fetchHistory();
    histories.unshift(historyToJson(history));
    runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  } while (runId);
  return histories;
}

/**
 * The histories of the child workflows a run started, and theirs (a batch's windows and their agents), by their ids'
 * last part (`agent:a1` written `agent-a1`).
 */
async function childrenOf(handle: WorkflowHandle, depth = 0): Promise<{ name: string; history: string }[]> {
  const history = await handle.fetchHistory();
  const ids = (history.events ?? []).flatMap(
    (event) => event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId ?? [],
  );
  const children = await Promise.all(
    ids.map(async (id) => {
      const child = handle.client.getHandle(id);
      const own = {
        name: (id.split('/').pop() as string).replace(':', '-'),
        history: historyToJson(await child.fetchHistory()),
      };
      return [own, ...(depth < 2 ? await childrenOf(child, depth + 1) : [])];
    }),
  );
  return children.flat();
}

function fixtureNames(name: string, label: string | undefined, runs: number): string[] {
  const base = label === undefined ? name : `${name}.${label}`;
  return runs === 1 ? [`${base}.json`] : Array.from({ length: runs }, (_, index) => `${base}.run-${index + 1}.json`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { only: { type: 'string' }, label: { type: 'string' }, force: { type: 'boolean', default: false } },
  });
  if (values.label !== undefined && !/^[a-z0-9-]+$/.test(values.label))
    throw new CaptureError(`--label ${values.label}: use lowercase letters, digits and dashes`);
  const wanted = values.only?.split(',').map((name) => name.trim());
  const unknown = wanted?.filter((name) => !scenarios.some((scenario) => scenario.name === name)) ?? [];
  if (unknown.length > 0)
    throw new CaptureError(
      `unknown scenario ${unknown.join(', ')}; known: ${scenarios.map((scenario) => scenario.name).join(', ')}`,
    );
  const selected = scenarios.filter((scenario) => wanted === undefined || wanted.includes(scenario.name));
  // A chain's run count is known only after it ran, so an existing fixture is detected by its name's prefix too.
  if (!values.force) {
    const existing = selected.flatMap((scenario) =>
      [1, 2]
        .flatMap((runs) => fixtureNames(scenario.name, values.label, runs))
        .filter((file) => existsSync(path.join(FIXTURES, file))),
    );
    if (existing.length > 0) {
      throw new CaptureError(
        `${existing.join(', ')} exist already. Runs of that shape may still be in flight: keep them and capture the new ` +
          'shape with --label <name>, or pass --force to replace them.',
      );
    }
  }

  // Plain payloads only: an encrypted fixture could not be replayed without the key.
  for (const variable of ['FANOUT_ENCRYPTION_KEYS', 'FANOUT_ENCRYPTION_KEY', 'FANOUT_STORE'])
    delete process.env[variable];
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const directory = mkdtempSync(path.join(tmpdir(), 'fanout-fixtures-'));
  const servers = await startTestServers({ simulator: { latency: { minMs: 5, maxMs: 20 } } });
  let stack: TestWorker | undefined;
  try {
    stack = await startTestWorker(servers, {
      heartbeatThrottleMs: 300,
      workerOptions: { workflowsPath: require.resolve('../src/workflows') },
    });
    mkdirSync(FIXTURES, { recursive: true });
    for (const scenario of selected) {
      const handle = await scenario.run(stack, scenario.name, directory);
      const histories = await chainOf(handle);
      const files = fixtureNames(scenario.name, values.label, histories.length);
      files.forEach((file, index) => writeFileSync(path.join(FIXTURES, file), histories[index]));
      const base = files[files.length - 1].slice(0, -'.json'.length);
      for (const child of await childrenOf(handle)) {
        const file = `${base}.${child.name}.json`;
        writeFileSync(path.join(FIXTURES, file), child.history);
        files.push(file);
      }
      console.log(`${scenario.name}: ${files.join(', ')}`);
    }
  } finally {
    await stack?.stop();
    await servers.stop();
    rmSync(directory, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof CaptureError ? error.message : error);
  process.exit(1);
});
