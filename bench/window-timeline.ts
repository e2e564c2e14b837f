/**
 * Where a batch's window loses time: one batch of equal calls (ours only), then, second by second, the calls in flight at
 * the simulator beside the lanes the window's history shows ending and starting, its workflow tasks, and every workflow
 * task that took longer than half a second from scheduled to completed (scheduled, started, completed).
 *
 *   tsx bench/window-timeline.ts [--items 4000] [--concurrency 500] [--latency-ms 3000] [--profile DIR] [--warmup]
 *
 * The worker is the built CLI (`npm run build` first), its own process; `--profile DIR` runs it with
 * `node --cpu-prof --cpu-prof-dir DIR` (one profile per thread: the main thread and the workflow thread).
 * `DUMP_EVENTS=PREFIX` also writes each window's events, one a line, to `PREFIX.<window>.txt` (where the failed workflow
 * tasks of docs/BENCHMARKS.md's "Stripes" showed). Prints only; docs/BENCHMARKS.md quotes what it showed.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { FanoutClient } from '../src/client/fanout-client';
import { startDevServer } from '../src/local/dev-server';
import { freePort } from '../src/local/free-port';
import { startSimulator, type SimulatedRequest } from '../src/sim/simulator';
import { scratchDirectory } from './scratch';

const CLI = path.join(__dirname, '..', 'dist', 'cli', 'main.js');
const { values: flags } = parseArgs({
  options: {
    items: { type: 'string', default: '4000' },
    concurrency: { type: 'string', default: '500' },
    'latency-ms': { type: 'string', default: '3000' },
    profile: { type: 'string' },
    /** A small batch first, so the measured one finds the worker warm (its workflow bundle loaded, its client connected). */
    warmup: { type: 'boolean', default: false },
  },
});
const ITEMS = Number(flags.items);
const CONCURRENCY = Number(flags.concurrency);
const LATENCY_MS = Number(flags['latency-ms']);

type Event = temporal.api.history.v1.IHistoryEvent;

/** A second of the window's history. */
interface Second {
  lanesEnded: number;
  lanesStarted: number;
  workflowTasks: number;
  other: string[];
}

/** When `event` happened, ms after `zero`. */
function msAfter(event: Event, zero: number): number {
  return Number(event.eventTime?.seconds ?? 0) * 1000 + Math.floor((event.eventTime?.nanos ?? 0) / 1e6) - zero;
}

function summarise(events: Event[], zero: number): void {
  const at = (event: Event) => msAfter(event, zero);
  const seconds = new Map<number, Second>();
  const second = (ms: number): Second => {
    const key = Math.floor(ms / 1000);
    let row = seconds.get(key);
    if (!row) seconds.set(key, (row = { lanesEnded: 0, lanesStarted: 0, workflowTasks: 0, other: [] }));
    return row;
  };
  const typeOf = new Map<number, string>();
  let scheduledAt = 0;
  let startedAt = 0;
  for (const event of events) {
    const ms = at(event);
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) {
      const type = scheduled.activityType?.name ?? '?';
      typeOf.set(Number(event.eventId), type);
      if (type === 'runBatchLane') second(ms).lanesStarted += 1;
      else second(ms).other.push(`${type} scheduled`);
    }
    const completed = event.activityTaskCompletedEventAttributes;
    if (completed) {
      const type = typeOf.get(Number(completed.scheduledEventId));
      if (type === 'runBatchLane') second(ms).lanesEnded += 1;
      else second(ms).other.push(`${type} completed`);
    }
    if (event.workflowTaskScheduledEventAttributes) scheduledAt = ms;
    if (event.workflowTaskStartedEventAttributes) startedAt = ms;
    if (event.workflowTaskCompletedEventAttributes) {
      second(ms).workflowTasks += 1;
      if (ms - scheduledAt > 500)
        console.log(`  slow workflow task: scheduled ${scheduledAt} ms, started ${startedAt} ms, completed ${ms} ms`);
    }
  }
  for (const key of [...seconds.keys()].sort((a, b) => a - b)) {
    const row = seconds.get(key) as Second;
    console.log(
      `  ${String(key).padStart(4)} s: lanes ended ${row.lanesEnded}, started ${row.lanesStarted}, workflow tasks ${row.workflowTasks} ${row.other.join(', ')}`,
    );
  }
}

/** The ms at the quantile `q` (0-1) of `values`, rounded. */
function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN);
}

/**
 * Where a lane's slot is idle, from the window's history and the simulator's log: scheduled to started, started to its
 * first call's arrival, its last answer to its completion, and its completion to the next lane's scheduling.
 */
function laneGaps(events: Event[], requests: SimulatedRequest[], zero: number): void {
  const byTask = new Map(requests.map((request) => [request.taskId, request]));
  const lanes = new Map<number, { scheduled: number; started?: number; completed?: number; ids: string[] }>();
  const completions: number[] = [];
  const schedules: number[] = [];
  for (const event of events) {
    const ms = msAfter(event, zero);
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name === 'runBatchLane') {
      const data = scheduled.input?.payloads?.[0]?.data;
      const input = data ? (JSON.parse(Buffer.from(data).toString('utf8')) as { entries?: { id: string }[] }) : {};
      lanes.set(Number(event.eventId), { scheduled: ms, ids: (input.entries ?? []).map((entry) => entry.id) });
      schedules.push(ms);
    }
    const started = event.activityTaskStartedEventAttributes;
    const startedLane = started && lanes.get(Number(started.scheduledEventId));
    if (startedLane) startedLane.started = ms;
    const completed = event.activityTaskCompletedEventAttributes;
    const completedLane = completed && lanes.get(Number(completed.scheduledEventId));
    if (completedLane) {
      completedLane.completed = ms;
      completions.push(ms);
    }
  }
  const gaps = { toStart: [] as number[], toFirstCall: [] as number[], lastAnswerToEnd: [] as number[] };
  for (const lane of lanes.values()) {
    const calls = lane.ids.flatMap((id) => byTask.get(id) ?? []);
    if (lane.started !== undefined) gaps.toStart.push(lane.started - lane.scheduled);
    if (lane.started !== undefined && calls.length > 0)
      gaps.toFirstCall.push(Math.min(...calls.map((call) => call.arrivedAt - zero)) - lane.started);
    if (lane.completed !== undefined && calls.length > 0)
      gaps.lastAnswerToEnd.push(lane.completed - Math.max(...calls.map((call) => (call.respondedAt ?? zero) - zero)));
  }
  // A lane's end to the next lane's scheduling: the slot's wait on the window's workflow task.
  const toNext = completions.flatMap((ms) => {
    const next = schedules.find((at) => at >= ms);
    return next === undefined ? [] : [next - ms];
  });
  const row = (name: string, values: number[]) =>
    console.log(
      `  ${name}: median ${quantile(values, 0.5)} ms, p90 ${quantile(values, 0.9)} ms, max ${quantile(values, 1)} ms (${values.length} lanes)`,
    );
  console.log('lanes, where a slot waits:');
  row('scheduled -> started', gaps.toStart);
  row('started -> first call arrives', gaps.toFirstCall);
  row('last answer -> lane completed', gaps.lastAnswerToEnd);
  row('lane completed -> next lane scheduled', toNext);
}

async function main(): Promise<void> {
  const simulator = await startSimulator({ latency: { minMs: LATENCY_MS, maxMs: LATENCY_MS } });
  const server = await startDevServer({ port: await freePort(), uiPort: await freePort() });
  const taskQueue = 'window-timeline';
  const nodeArgs = flags.profile ? ['--cpu-prof', '--cpu-prof-dir', flags.profile] : [];
  const worker = spawn(
    process.execPath,
    [...nodeArgs, CLI, 'worker', '--address', server.address, '--task-queue', taskQueue],
    {
      env: { ...process.env, OPENAI_BASE_URL: simulator.baseUrl, OPENAI_API_KEY: 'bench' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  worker.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  worker.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const connection = await Connection.connect({ address: server.address });
  try {
    while (!output.includes('worker polling')) {
      if (worker.exitCode !== null) throw new Error(`the worker exited: ${output}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const client = new Client({ connection });
    const fanout = await FanoutClient.connect({ client, taskQueue });
    const directory = scratchDirectory('fanout-window-timeline-');
    const source = path.join(directory, 'tasks.jsonl');
    writeFileSync(
      source,
      Array.from({ length: ITEMS }, (_, index) => `${JSON.stringify({ id: `item-${index}`, prompt: 'work' })}\n`).join(
        '',
      ),
    );
    if (flags.warmup) {
      const warm = path.join(directory, 'warm.jsonl');
      writeFileSync(
        warm,
        Array.from({ length: 20 }, (_, index) => `${JSON.stringify({ id: `warm-${index}`, prompt: 'work' })}\n`).join(
          '',
        ),
      );
      await (
        await fanout.startBatch({
          source: warm,
          sink: path.join(directory, 'warm-results.jsonl'),
          options: { concurrency: CONCURRENCY },
        })
      ).result();
    }
    const startedAt = Date.now();
    const handle = await fanout.startBatch({
      source,
      sink: path.join(directory, 'results.jsonl'),
      options: { concurrency: CONCURRENCY },
    });
    const summary = await handle.result();
    const wallMs = Date.now() - startedAt;
    const idealMs = Math.ceil(ITEMS / CONCURRENCY) * LATENCY_MS;
    console.log(
      `${ITEMS} items of ${LATENCY_MS} ms at ${CONCURRENCY}: wall ${wallMs} ms, ideal ${idealMs} ms, ` +
        `${(wallMs / idealMs).toFixed(2)} x ideal, ${summary.runs} window(s)`,
    );
    const requests = simulator.log().filter((request) => request.workflowId === handle.batchId);
    const zero = Math.min(...requests.map((request) => request.arrivedAt));
    const inFlight: number[] = [];
    for (let at = zero; at < zero + wallMs; at += 1000)
      inFlight.push(
        requests.filter((request) => request.arrivedAt <= at && (request.respondedAt ?? Infinity) > at).length,
      );
    console.log(`calls in flight every 1 s from the first call: ${inFlight.join(' ')}`);
    const firstRunId = (await client.workflow.getHandle(handle.batchId).describe()).raw.workflowExecutionInfo
      ?.firstRunId;
    const batchEvents = (await client.workflow.getHandle(handle.batchId).fetchHistory()).events ?? [];
    const printEvent = (event: Event) => {
      const kind = Object.keys(event).find((key) => key.endsWith('EventAttributes')) ?? '?';
      const ms = msAfter(event, zero);
      const activity = event.activityTaskScheduledEventAttributes?.activityType?.name;
      console.log(`  ${ms} ms ${kind.replace('EventAttributes', '')}${activity ? ` ${activity}` : ''}`);
    };
    // The start: from startBatch's call to the window's first lane, then the batch's end.
    console.log(`the batch's start (ms from the first call; startBatch called at ${startedAt - zero} ms):`);
    for (const event of batchEvents.slice(0, 14)) printEvent(event);
    console.log("the batch's end:");
    for (const event of batchEvents.slice(-12)) printEvent(event);
    // Windows by number (a batch in stripes numbers stripe k's windows k, k + stripes, ...; not every number ran).
    const windowIds = new Set(
      batchEvents.flatMap((event) => event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId ?? []),
    );
    for (let window = 0; window < summary.runs; window += 1) {
      if (!windowIds.has(`${handle.batchId}/${firstRunId}/window-${window}`)) continue;
      const history = await client.workflow
        .getHandle(`${handle.batchId}/${firstRunId}/window-${window}`)
        .fetchHistory();
      console.log(`window ${window} (${history.events?.length ?? 0} events), by second from the first call:`);
      if (process.env.DUMP_EVENTS)
        writeFileSync(
          `${process.env.DUMP_EVENTS}.${window}.txt`,
          (history.events ?? [])
            .map((event) => {
              const kind = Object.keys(event).find((key) => key.endsWith('EventAttributes')) ?? '?';
              return `${event.eventId} ${msAfter(event, zero)} ${kind.replace('EventAttributes', '')} ${JSON.stringify(event[kind as keyof Event]).slice(0, 300)}`;
            })
            .join('\n'),
        );
      if (window === 0) {
        console.log('  its start, up to its first lane:');
        const events = history.events ?? [];
        const firstLane = events.findIndex(
          (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'runBatchLane',
        );
        for (const event of events.slice(0, firstLane + 1)) printEvent(event);
      }
      summarise(history.events ?? [], zero);
      laneGaps(history.events ?? [], requests, zero);
    }
  } finally {
    worker.kill('SIGTERM');
    await new Promise((resolve) => worker.once('exit', resolve));
    await connection.close();
    await server.stop();
    await simulator.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
