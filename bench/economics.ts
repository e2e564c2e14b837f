/**
 * `npm run bench` (after the other benchmarks): what runs cost in Temporal actions, and pacing at a provider's rate
 * limit. Writes the "Economics" section of docs/BENCHMARKS.md.
 *
 * 1. Billable actions per agent call, read from a dev server's own `action` counter (`--metrics-port`), for fan-outs of
 *    calls from 1 s to 118 s, a batch, `fanout watch` and `batch status --watch` alongside, a cancelled run and a
 *    SIGKILLed worker.
 * 2. A 2,000-item batch against a simulator enforcing 600 requests / 150,000 tokens a minute (OpenAI's headers and
 *    429s), with 1, 2 and 4 paced worker processes and, in the same run, one unpaced worker (FANOUT_PACING=off: a fixed
 *    --concurrency 50, the seed guide's semaphore pattern).
 *
 * Env: BENCH_PACING_ITEMS (default 2000), BENCH_PACING_WORKERS (default "1,2,4"), BENCH_ECONOMICS_PARTS ("actions,pacing"),
 * BENCH_ECONOMICS_ONLY (a part of a scenario's name: only those rows of the actions table; nothing is written).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DefaultLogger, Runtime, type Worker } from '@temporalio/worker';
import { createLlmClient } from '../src/llm/llm-client';
import { FanoutClient } from '../src/client/fanout-client';
import type { AgentTask } from '../src/contract/agent-task';
import type { SimulatorConfigInput } from '../src/sim/config';
import type { SimulatedRequest } from '../src/sim/simulator';
import { createFanoutWorker } from '../src/worker';
import {
  difference,
  settledActions,
  startMeteredServer,
  total,
  type MeteredServer,
} from '../test/support/metered-server';
import { spawnSimulator, type RemoteSimulator } from './remote-simulator';
import { scratchDirectory } from './scratch';

Runtime.install({ logger: new DefaultLogger('ERROR') });

const CLI = path.join(__dirname, '..', 'dist', 'cli', 'main.js');
const ITEMS = Number(process.env.BENCH_PACING_ITEMS ?? 2000);
const WORKER_COUNTS = (process.env.BENCH_PACING_WORKERS ?? '1,2,4').split(',').map(Number);
const PARTS = (process.env.BENCH_ECONOMICS_PARTS ?? 'actions,pacing').split(',');
/** Only the scenarios of the actions table whose name holds this text (the section is printed, not written). */
const ONLY = process.env.BENCH_ECONOMICS_ONLY;
const DOLLARS_PER_MILLION_ACTIONS = 50;
const directory = scratchDirectory('fanout-economics-');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function configure(simulator: RemoteSimulator, config: SimulatorConfigInput): Promise<void> {
  const response = await fetch(`${simulator.baseUrl.replace(/\/v1$/, '')}/_sim/config`, {
    method: 'PUT',
    body: JSON.stringify(config),
  });
  if (!response.ok) throw new Error(`simulator config refused: ${await response.text()}`);
  await simulator.reset();
}

function tasks(prefix: string, count: number, marker = ''): AgentTask[] {
  return Array.from({ length: count }, (_, index) => ({
    id: `${prefix}-${index}`,
    prompt: `economics ${index} ${marker}`.trim(),
  }));
}

function cli(args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [CLI, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
}

interface WorkerProcess {
  child: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

async function spawnWorker(
  server: MeteredServer,
  taskQueue: string,
  env: Record<string, string>,
): Promise<WorkerProcess> {
  const child = spawn(process.execPath, [CLI, 'worker', '--address', server.address, '--task-queue', taskQueue], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const deadline = Date.now() + 60_000;
  while (!output.includes('worker polling')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`worker did not start: ${output}`);
    await sleep(100);
  }
  return {
    child,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}

interface CostRow {
  scenario: string;
  calls: number;
  spent: Record<string, number>;
  note?: string;
}

function costTable(rows: CostRow[]): string {
  const lines = rows.map((row) => {
    const all = total(row.spent);
    // A worker's own heartbeats, and the one a peer's watchdog records for a lost worker's call (its attempt's note).
    const heartbeats =
      (row.spent.grpc_RecordActivityTaskHeartbeat ?? 0) + (row.spent.grpc_RecordActivityTaskHeartbeatById ?? 0);
    const queries = row.spent.grpc_QueryWorkflow ?? 0;
    const dollars = ((all / row.calls) * 1000 * DOLLARS_PER_MILLION_ACTIONS) / 1e6;
    return `| ${row.scenario} | ${row.calls} | ${all} | ${(all / row.calls).toFixed(2)} | ${heartbeats} | ${queries} | $${dollars.toFixed(3)} | ${row.note ?? ''} |`;
  });
  return [
    '| scenario | agent calls | actions | actions per call | of which heartbeats | of which queries | $ per 1,000 calls | note |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    ...lines,
  ].join('\n');
}

async function actionsPerCall(server: MeteredServer): Promise<string> {
  const simulator = await spawnSimulator(['--latency', '1000']);
  const taskQueue = 'bench-economics';
  const worker: Worker = await createFanoutWorker({
    connection: server.nativeConnection,
    taskQueue,
    activities: { llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'bench' }) },
  });
  const running = worker.run();
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const rows: CostRow[] = [];
  const measure = async (scenario: string, calls: number, body: () => Promise<string | undefined>) => {
    if (ONLY !== undefined && !scenario.includes(ONLY)) return;
    const before = await settledActions(server);
    const note = await body();
    const spent = difference(await settledActions(server), before);
    rows.push({ scenario, calls, spent, note });
    console.error(`economics: ${scenario}: ${total(spent)} actions for ${calls} calls ${JSON.stringify(spent)}`);
  };
  try {
    for (const seconds of [1, 10, 60, 118]) {
      await measure(`fan-out, 20 calls of ${seconds} s`, 20, async () => {
        const { results } = await client.runParallel(tasks(`f${seconds}`, 20, `[sim latency=${seconds * 1000}]`));
        if (results.some((result) => result.status !== 'ok')) throw new Error('a benchmark agent failed');
        return seconds === 118 ? 'agentTimeoutMs is 120 s by default' : undefined;
      });
    }
    await measure('fan-out, 20 calls of 10 s, heartbeatTimeoutMs 10000 (opt-in heartbeats)', 20, async () => {
      await client.runParallel(tasks('hb', 20, '[sim latency=10000]'), { heartbeatTimeoutMs: 10_000 });
      return 'a heartbeat every 4 s per call';
    });
    await measure('fan-out, 20 calls of 10 s, `fanout watch` alongside', 20, async () => {
      const handle = await client.startParallel(tasks('w', 20, '[sim latency=10000]'));
      const watcher = cli(['watch', handle.workflowId, '--address', server.address, '--json']);
      await handle.result();
      await new Promise((resolve) => (watcher.exitCode === null ? watcher.once('exit', resolve) : resolve(undefined)));
      return undefined;
    });
    const source = path.join(directory, 'batch-20.jsonl');
    writeFileSync(
      source,
      `${tasks('b', 20, '[sim latency=10000]')
        .map((task) => JSON.stringify(task))
        .join('\n')}\n`,
    );
    await measure('batch, 20 items of 10 s, `batch status --watch` alongside', 20, async () => {
      const handle = await client.startBatch({
        source,
        sink: path.join(directory, 'batch-20.out.jsonl'),
        options: { concurrency: 20 },
      });
      const watcher = cli(['batch', 'status', handle.batchId, '--watch', '--json', '--address', server.address]);
      await handle.result();
      await new Promise((resolve) => (watcher.exitCode === null ? watcher.once('exit', resolve) : resolve(undefined)));
      return undefined;
    });
    await measure('fan-out, 20 calls of 60 s, cancelled after 5 s', 20, async () => {
      await simulator.reset();
      const handle = await client.startParallel(tasks('c', 20, '[sim latency=60000]'));
      await sleep(5000);
      const cancelledAt = Date.now();
      await handle.cancel();
      await handle.result().catch(() => undefined);
      const closed = (await simulator.log())
        .filter((request) => request.workflowId === handle.workflowId)
        .map((request) => request.clientClosedAt ?? Number.NaN);
      return `every request closed ${((Math.max(...closed) - cancelledAt) / 1000).toFixed(1)} s after the cancel`;
    });
    await measure('fan-out, 1 call whose worker process is SIGKILLed', 1, async () => {
      const lostQueue = 'bench-economics-lost';
      const env = { OPENAI_BASE_URL: simulator.baseUrl, OPENAI_API_KEY: 'bench' };
      const doomed = await spawnWorker(server, lostQueue, env);
      const lostClient = await FanoutClient.connect({ client: server.client, taskQueue: lostQueue });
      await simulator.reset();
      const handle = await lostClient.startParallel([{ id: 'orphan', prompt: 'orphan [sim fault=hang times=1]' }]);
      while ((await simulator.log()).length === 0) await sleep(100);
      const survivor = await spawnWorker(server, lostQueue, env);
      await doomed.stop('SIGKILL');
      const killedAt = Date.now();
      await handle.result();
      const retry = (await simulator.log()).find((request) => request.attempt === 2);
      await survivor.stop();
      return `retried ${(((retry?.arrivedAt ?? Number.NaN) - killedAt) / 1000).toFixed(1)} s after the kill (agentTimeoutMs 120 s)`;
    });
  } finally {
    worker.shutdown();
    await running;
    await simulator.close();
  }
  return costTable(rows);
}

interface PacingRow {
  label: string;
  wallS: number;
  requests: number;
  rateLimited: number;
  ok: number;
  failed: number;
  maxAttempts: number;
  requestsPerMinute: number;
  tokensPerMinute: number;
  actionsPerCall: number;
}

/**
 * Rates over the middle of the run (completions between its 25th and 90th percentile): after the provider's initial
 * bucket (10 s of refill) is spent, and before the tail, when fewer calls are left than the window holds.
 */
function sustained(log: SimulatedRequest[]): { requestsPerMinute: number; tokensPerMinute: number } {
  const answered = log
    .filter((request) => request.outcome === 200 && request.respondedAt !== undefined)
    .sort((a, b) => (a.respondedAt ?? 0) - (b.respondedAt ?? 0));
  const from = Math.floor(answered.length * 0.25);
  const to = Math.floor(answered.length * 0.9);
  const window = answered.slice(from, to);
  const minutes = ((window[window.length - 1]?.respondedAt ?? 0) - (window[0]?.respondedAt ?? 0)) / 60_000;
  const tokens = window.reduce((sum, request) => sum + (request.rateLimitTokens ?? 0), 0);
  return { requestsPerMinute: window.length / minutes, tokensPerMinute: tokens / minutes };
}

const RPM = 600;
const TPM = 150_000;

async function pacingRun(
  server: MeteredServer,
  simulator: RemoteSimulator,
  source: string,
  label: string,
  workers: number,
  paced: boolean,
): Promise<PacingRow> {
  await configure(simulator, {
    seed: 'pacing',
    latency: { minMs: 1000, maxMs: 3000 },
    completionTokens: { min: 150, max: 250 },
    rateLimits: { requestsPerMinute: RPM, tokensPerMinute: TPM, burstSeconds: 10 },
  });
  const taskQueue = `bench-pacing-${workers}-${paced ? 'paced' : 'unpaced'}`;
  const env = {
    OPENAI_BASE_URL: simulator.baseUrl,
    OPENAI_API_KEY: 'bench-pacing',
    FANOUT_PACING: paced ? 'on' : 'off',
  };
  const processes = await Promise.all(Array.from({ length: workers }, () => spawnWorker(server, taskQueue, env)));
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const before = await settledActions(server);
  const startedAt = performance.now();
  try {
    const sink = path.join(directory, `${taskQueue}.out.jsonl`);
    const summary = await (await client.startBatch({ source, sink, options: { concurrency: 50 } })).result();
    const wallS = (performance.now() - startedAt) / 1000;
    const spent = total(await settledActions(server), before);
    const log = await simulator.log();
    const lines = readFileSync(sink, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { attempts?: number });
    const row: PacingRow = {
      label,
      wallS,
      requests: log.length,
      rateLimited: log.filter((request) => request.rateLimited !== undefined).length,
      ok: summary.succeeded,
      failed: summary.failed,
      maxAttempts: Math.max(...lines.map((line) => line.attempts ?? 1)),
      ...sustained(log),
      actionsPerCall: spent / ITEMS,
    };
    console.error(`pacing: ${label}: ${JSON.stringify(row)}`);
    return row;
  } finally {
    await Promise.all(processes.map((worker) => worker.stop()));
  }
}

async function pacing(server: MeteredServer): Promise<string> {
  const simulator = await spawnSimulator(['--latency', '1000']);
  // ~100 tokens of prompt and max_tokens 300: 400 reserved at admission, ~300 used (answers of 150-250 tokens).
  const source = path.join(directory, `pacing-${ITEMS}.jsonl`);
  const prompt = `Summarise the following notes in one paragraph. ${'lorem ipsum dolor sit amet '.repeat(14)}`.slice(
    0,
    400,
  );
  writeFileSync(
    source,
    `${Array.from({ length: ITEMS }, (_, index) => JSON.stringify({ id: `p-${index}`, prompt, maxTokens: 300 })).join('\n')}\n`,
  );
  const rows: PacingRow[] = [];
  try {
    for (const workers of WORKER_COUNTS)
      rows.push(
        await pacingRun(
          server,
          simulator,
          source,
          `paced, ${workers} worker process${workers > 1 ? 'es' : ''}`,
          workers,
          true,
        ),
      );
    rows.push(await pacingRun(server, simulator, source, 'unpaced (FANOUT_PACING=off), 1 worker process', 1, false));
  } finally {
    await simulator.close();
  }
  const binding = (row: PacingRow) => Math.max(row.requestsPerMinute / RPM, row.tokensPerMinute / TPM);
  return [
    '| run | wall (s) | requests sent | answered 429 | 429 share | ok / failed | most attempts of an item | sustained requests / min (of 600) | sustained tokens / min (of 150,000) | binding limit used | actions per call |',
    '| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (row) =>
        `| ${row.label} | ${row.wallS.toFixed(0)} | ${row.requests} | ${row.rateLimited} | ${((100 * row.rateLimited) / row.requests).toFixed(1)}% | ${row.ok} / ${row.failed} | ${row.maxAttempts} | ${row.requestsPerMinute.toFixed(0)} | ${row.tokensPerMinute.toFixed(0)} | ${(100 * binding(row)).toFixed(0)}% | ${row.actionsPerCall.toFixed(2)} |`,
    ),
  ].join('\n');
}

async function main(): Promise<void> {
  if (!existsSync(CLI)) throw new Error('build first: npm run build');
  const server = await startMeteredServer();
  let actions = '';
  let paced = '';
  try {
    if (PARTS.includes('actions')) actions = await actionsPerCall(server);
    if (PARTS.includes('pacing')) paced = await pacing(server);
  } finally {
    await server.stop();
  }
  const target = path.join(__dirname, '..', 'docs', 'BENCHMARKS.md');
  const existing = readFileSync(target, 'utf8');
  const start = existing.indexOf('\n## Economics');
  // The next section, or the marker comment in front of it (bench/agents.ts writes between its markers).
  const ends = ['\n## ', '\n<!-- '].map((text) => existing.indexOf(text, start + 1)).filter((index) => index >= 0);
  const end = start < 0 || ends.length === 0 ? -1 : Math.min(...ends);
  const before = start < 0 ? existing.trimEnd() : existing.slice(0, start).trimEnd();
  const after = end < 0 ? '' : `\n${existing.slice(end).trimStart()}`;
  const section = renderSection(actions, paced);
  if (ONLY !== undefined) {
    console.log(section);
    return;
  }
  writeFileSync(target, `${before}\n\n${section}${after ? `\n${after}` : ''}`);
  console.error('wrote the Economics section of docs/BENCHMARKS.md');
}

function renderSection(actions: string, paced: string): string {
  return `## Economics

Command: \`npm run bench\` (\`bench/economics.ts\`, after the batch benchmarks). Last run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, ${os.cpus().length} cores.
A dev server started with \`--metrics-port\`; every figure of actions is its own \`action\` counter (what Temporal Cloud bills,
about $${DOLLARS_PER_MILLION_ACTIONS} per million), read before and after each scenario once it stopped moving.

### Billable actions per agent call

Default settings (no heartbeat timeout; the worker watches for cancellation with free DescribeWorkflowExecution calls and for
lost peers with free presence polls; see docs/ARCHITECTURE.md, "Economics"). Before this change the issue measured 6.9 actions
per call for 10 s calls (5.9 of them heartbeats), 7.8 for a batch with \`--watch\`, and about 31 for a 60 s call.

${actions || '(not run: BENCH_ECONOMICS_PARTS)'}

Reading it: a fan-out costs one action to start plus one per call, whatever the calls' length. A batch adds its scan, page
reads, flushes and finishing activities, and a memo update per flush (none of them heartbeats unless it runs over 3 s);
over 2,000 items, whose lanes each run several items in one activity, that is about half an action per call (below).
\`fanout watch\` costs a few queries a run instead of two every half second, a cancelled call one heartbeat, and a lost
worker's call the one retry it needs and one heartbeat, which a live worker records for it so that the retry's trace shows
the lost attempt.

### Pacing at the provider's limit

${ITEMS.toLocaleString('en-US')} items, \`--concurrency 50\`, against the simulator enforcing ${RPM} requests and ${TPM.toLocaleString('en-US')} tokens a minute per
key and model like OpenAI (buckets holding 10 s of refill, \`x-ratelimit-*\` headers on every response, 429 with Retry-After).
Each request reserves ~100 prompt tokens + max_tokens 300 and uses ~100 + 150-250; calls take 1-3 s. With ~300 tokens a
request, 150,000 tokens a minute allow ~500 requests a minute: the token limit binds. "Sustained" rates are over the completions
between the 25th and 90th percentile of the run (after the initial bucket is spent, before the tail); tokens are what the
simulator settled (prompt estimate + answer). Every worker process paces itself from the headers it sees; none talk to each
other. 429s are waited out inside the attempt in every run, so no item fails either way: the unpaced run pays in refused
requests instead.

${paced || '(not run: BENCH_ECONOMICS_PARTS)'}

Reading it: paced, one, two or four worker processes all run at the binding limit with almost no 429s; the few come from
processes admitting at the same moment on the same reading (the 10% headroom absorbs most). Unpaced, a fixed 50 in flight
asks for about three times the limit: the provider refuses ~25 requests for every one it serves, and each refusal is a
wasted round trip (here it costs no throughput only because the simulator, unlike OpenAI, does not count refused requests
against the limit). Before 429s were waited out within the attempt, each of those refusals also used one of an item's 5
attempts, and a storm like this one marked items failed.
`;
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
