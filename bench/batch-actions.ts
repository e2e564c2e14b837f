/**
 * `npm run bench` (or `tsx bench/batch-actions.ts`, after `npm run build`): what a small batch costs in billable actions
 * beside a fan-out of the same calls, counted two ways in one run: the dev server's own `action` counter
 * (`--metrics-port`), and the event histories of every workflow of the run (the batch, its windows, any child), by kind.
 * Writes the "Small batches in actions" section of docs/BENCHMARKS.md.
 *
 * Env: BENCH_ACTIONS_ITEMS (default 20), BENCH_ACTIONS_CALL_MS (default 10000), BENCH_ACTIONS_ROUNDS (default 1).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createLlmClient } from '../src/llm/llm-client';
import { FanoutClient } from '../src/client/fanout-client';
import type { AgentTask } from '../src/contract/agent-task';
import { createFanoutWorker } from '../src/worker';
import {
  difference,
  settledActions,
  startMeteredServer,
  total,
  type MeteredServer,
} from '../test/support/metered-server';
import { spawnSimulator } from './remote-simulator';
import { scratchDirectory } from './scratch';

Runtime.install({ logger: new DefaultLogger('ERROR') });

const CLI = path.join(__dirname, '..', 'dist', 'cli', 'main.js');
const ITEMS = Number(process.env.BENCH_ACTIONS_ITEMS ?? 20);
const CALL_MS = Number(process.env.BENCH_ACTIONS_CALL_MS ?? 10_000);
const ROUNDS = Number(process.env.BENCH_ACTIONS_ROUNDS ?? 1);
const directory = scratchDirectory('fanout-batch-actions-');
const EventType = temporal.api.enums.v1.EventType;

/** The kinds of history event that are, or go with, a billable action. */
const KINDS: Record<string, string> = {
  EVENT_TYPE_WORKFLOW_TASK_COMPLETED: 'workflow tasks completed',
  EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: 'activities scheduled',
  EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED: 'children started',
  EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: 'signals sent',
  EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: 'signals received',
  EVENT_TYPE_TIMER_STARTED: 'timers',
  EVENT_TYPE_MARKER_RECORDED: 'markers',
  EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: 'search attribute upserts',
  EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED: 'memo upserts',
  EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: 'continue-as-new',
};

interface Histories {
  workflows: number;
  events: number;
  byKind: Record<string, number>;
}

/** Every workflow of a run (the root, its children, theirs), each run of it, counted by event kind. */
async function histories(client: Client, workflowId: string): Promise<Histories> {
  const result: Histories = { workflows: 0, events: 0, byKind: {} };
  const queue = [workflowId];
  while (queue.length > 0) {
    const id = queue.shift() as string;
    result.workflows += 1;
    const history = await client.workflow.getHandle(id).fetchHistory();
    for (const event of history.events ?? []) {
      result.events += 1;
      const name = EventType[event.eventType ?? 0];
      const kind = KINDS[name];
      if (kind) result.byKind[kind] = (result.byKind[kind] ?? 0) + 1;
      const child = event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId;
      if (child) queue.push(child);
    }
  }
  return result;
}

function tasks(prefix: string): AgentTask[] {
  return Array.from({ length: ITEMS }, (_, index) => ({
    id: `${prefix}-${index}`,
    prompt: `actions ${index} [sim latency=${CALL_MS}]`,
  }));
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode === null && child.signalCode === null
    ? new Promise((resolve) => child.once('exit', () => resolve()))
    : Promise.resolve();
}

interface Row {
  scenario: string;
  spent: Record<string, number>;
  histories: Histories;
}

async function measureAll(server: MeteredServer): Promise<Row[]> {
  const simulator = await spawnSimulator(['--latency', '100']);
  const taskQueue = 'bench-batch-actions';
  const worker = await createFanoutWorker({
    connection: server.nativeConnection,
    taskQueue,
    activities: { llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'bench' }) },
  });
  const running = worker.run();
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const rows: Row[] = [];
  const measure = async (scenario: string, body: () => Promise<string>) => {
    const before = await settledActions(server);
    const workflowId = await body();
    const spent = difference(await settledActions(server), before);
    rows.push({ scenario, spent, histories: await histories(server.client, workflowId) });
    console.error(`batch-actions: ${scenario}: ${total(spent)} actions (${JSON.stringify(spent)})`);
  };
  const taskFile = (name: string): string => {
    const source = path.join(directory, `${name}.jsonl`);
    writeFileSync(
      source,
      `${tasks(name)
        .map((task) => JSON.stringify(task))
        .join('\n')}\n`,
    );
    return source;
  };
  const batchOf = async (round: number, watch: boolean): Promise<string> => {
    const name = `batch-${round}-${watch ? 'watched' : 'alone'}`;
    const source = taskFile(name);
    const handle = await client.startBatch({
      source,
      sink: path.join(directory, `${name}.out.jsonl`),
      options: { concurrency: ITEMS },
    });
    const watcher = watch
      ? spawn(
          process.execPath,
          [CLI, 'batch', 'status', handle.batchId, '--watch', '--json', '--address', server.address],
          {
            stdio: 'ignore',
          },
        )
      : undefined;
    const summary = await handle.result();
    if (watcher) await exited(watcher);
    if (summary.succeeded !== ITEMS) throw new Error(`batch ${name}: ${summary.succeeded} of ${ITEMS} answered`);
    return handle.batchId;
  };
  try {
    for (let round = 1; round <= ROUNDS; round += 1) {
      await measure(`fan-out of ${ITEMS}`, async () => {
        const handle = await client.startParallel(tasks(`fan-${round}`));
        const result = await handle.result();
        if (result.results.some((one) => one.status !== 'ok')) throw new Error('a benchmark call failed');
        return handle.workflowId;
      });
      await measure(`batch of ${ITEMS}, concurrency ${ITEMS}`, () => batchOf(round, false));
      await measure(`batch of ${ITEMS}, concurrency ${ITEMS}, \`batch status --watch\` alongside`, () =>
        batchOf(round, true),
      );
      await measure(`batch of ${ITEMS}, concurrency ${ITEMS}, \`fanout batch start --watch\``, async () => {
        const name = `batch-${round}-cli`;
        const source = taskFile(name);
        const batchId = `bench-actions-${round}-${Date.now()}`;
        const cli = spawn(
          process.execPath,
          [
            CLI,
            'batch',
            'start',
            source,
            '--out',
            path.join(directory, `${name}.out.jsonl`),
            '--id',
            batchId,
            '--concurrency',
            String(ITEMS),
            '--watch',
            '--json',
            '--address',
            server.address,
            '--task-queue',
            taskQueue,
          ],
          { stdio: 'ignore' },
        );
        await exited(cli);
        if (cli.exitCode !== 0) throw new Error(`fanout batch start --watch exited with ${cli.exitCode}`);
        return batchId;
      });
    }
  } finally {
    worker.shutdown();
    await running;
    await simulator.close();
  }
  return rows;
}

function table(rows: Row[]): string {
  const kinds = Object.values(KINDS).filter((kind) => rows.some((row) => row.histories.byKind[kind]));
  const types = [...new Set(rows.flatMap((row) => Object.keys(row.spent)))].sort();
  const short = (type: string) => type.replace(/^grpc_/, '').replace(/^command_/, '');
  return [
    `| scenario | actions | per call | ${types.map(short).join(' | ')} | workflows | events | ${kinds.join(' | ')} |`,
    `| --- | ---: | ---: | ${types.map(() => '---:').join(' | ')} | ---: | ---: | ${kinds.map(() => '---:').join(' | ')} |`,
    ...rows.map(
      (row) =>
        `| ${row.scenario} | ${total(row.spent)} | ${(total(row.spent) / ITEMS).toFixed(2)} | ${types.map((type) => row.spent[type] ?? 0).join(' | ')} | ${row.histories.workflows} | ${row.histories.events} | ${kinds.map((kind) => row.histories.byKind[kind] ?? 0).join(' | ')} |`,
    ),
  ].join('\n');
}

/** The least and most workflow tasks of the rows that `which` picks, as "a-b". */
function range(rows: Row[], which: (row: Row) => boolean): string {
  const tasks = rows.filter(which).map((row) => row.histories.byKind['workflow tasks completed'] ?? 0);
  return `${Math.min(...tasks)}-${Math.max(...tasks)}`;
}

async function main(): Promise<void> {
  if (!existsSync(CLI)) throw new Error('build first: npm run build');
  const server = await startMeteredServer();
  let rows: Row[];
  try {
    rows = await measureAll(server);
  } finally {
    await server.stop();
  }
  const section = `## Small batches in actions

Command: \`npm run bench\` (\`tsx bench/batch-actions.ts\` after \`npm run build\`). Last run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, ${os.cpus().length} cores.
${ITEMS} calls of ${(CALL_MS / 1000).toFixed(1)} s, as a fan-out and as a batch at concurrency ${ITEMS}, on a dev server started with
\`--metrics-port\`: the action columns are its own \`action\` counter by type (what Temporal Cloud bills), read before and after
each scenario once it stopped moving; the event columns count the histories of every workflow of the run (the batch, its
windows) by kind. ${ROUNDS > 1 ? `${ROUNDS} rounds, one row each.` : ''}

${table(rows)}

Reading it: a fan-out costs its start and one activity per call. The batch adds its scan and finish (two activities), its
window's start (a child start is two actions, \`StartChildWorkflowExecution\` and its \`_Extra\`) and one memo (the batch's;
its only window writes none): ${ITEMS} calls in ${ITEMS} lanes of one, whatever their length. A watcher adds one query per
workflow it reads at each look (the batch and its running window), a look only when the batch's history moved, at most
every 5 s, and none before the first window has started. Workflow tasks are not billed (Temporal Cloud's list of actions
has none, and the server's counter counts none): the events columns show them for what they cost the worker, ${range(rows, (row) => !row.scenario.startsWith('fan-out'))} a batch
and ${range(rows, (row) => row.scenario.startsWith('fan-out'))} a fan-out here, by how many calls end in the same task. The counts of actions are the same
with calls of 2 s (\`BENCH_ACTIONS_CALL_MS=2000\`): nothing in them depends on the calls' length below a lane's heartbeat (15 s). Before the only window's memo and the watcher's look at a
scanning batch went (commit dceb9ac, the same command, 2 rounds): fan-out 21, batch 27 (1.35 a call: 2 memos), with
\`batch status --watch\` 29 (1.45), through \`fanout batch start --watch\` 30 (1.50: 3 queries). Issue 31's 1.60 (28
command actions, 3 queries, 1 start) matches the code before d3d3c44, whose window also recorded a patch marker and the
search attribute listing it (0.1.0's patches, retired since).
`;
  const target = path.join(__dirname, '..', 'docs', 'BENCHMARKS.md');
  const existing = readFileSync(target, 'utf8');
  const start = existing.indexOf('\n## Small batches in actions');
  const end = start < 0 ? -1 : existing.indexOf('\n## ', start + 1);
  const before = start < 0 ? existing.trimEnd() : existing.slice(0, start).trimEnd();
  const after = end < 0 ? '' : `\n${existing.slice(end).trimStart()}`;
  if (process.env.BENCH_ACTIONS_WRITE !== 'off') {
    writeFileSync(target, `${before}\n\n${section}${after ? `\n${after}` : ''}`);
    console.error('wrote the "Small batches in actions" section of docs/BENCHMARKS.md');
  } else console.log(section);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
