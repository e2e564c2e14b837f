import { execFileSync } from 'node:child_process';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { batchDirectory, readSink, sinkCounts, writeTasks } from './support/batch-files';
import { maxOverlap } from './support/overlap';
import { FanoutClient } from '../src/client/fanout-client';
import { decodePayload } from './support/history';
import { runCli, spawnWorker, type WorkerProcess } from './support/processes';
import { startTestServers, startTestWorker, uniqueName, type TestServers, type TestWorker } from './support/test-stack';
import { waitFor } from './support/wait-for';

let servers: TestServers;
let stack: TestWorker;
const directory = batchDirectory();
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  servers = await startTestServers({ simulator: { latency: { minMs: 10, maxMs: 10 } } });
  stack = await startTestWorker(servers);
});

afterAll(async () => {
  for (const worker of workers) await worker.stop();
  await stack?.stop();
  await servers?.stop();
});

function requestsOf(batchId: string) {
  return servers.simulator.log().filter((request) => request.workflowId === batchId);
}

/** Items of the run's chunk activities that are scheduled and not yet completed (or failed, or timed out). */
async function itemsInOpenChunks(workflow: WorkflowHandle): Promise<number> {
  const history = await workflow.fetchHistory();
  const open = new Map<string, number>();
  for (const event of history.events ?? []) {
    const scheduledChunk = event.activityTaskScheduledEventAttributes;
    if (scheduledChunk?.activityType?.name === 'runBatchChunk') {
      const input = decodePayload(scheduledChunk.input?.payloads?.[0]) as { entries: unknown[] };
      open.set(String(event.eventId), input.entries.length);
    }
    const closed = event.activityTaskCompletedEventAttributes ?? event.activityTaskFailedEventAttributes ?? event.activityTaskTimedOutEventAttributes;
    if (closed) open.delete(String(closed.scheduledEventId));
  }
  return [...open.values()].reduce((sum, count) => sum + count, 0);
}

/** The activities a run scheduled: type and id, in order. */
async function scheduled(workflow: WorkflowHandle): Promise<{ type: string; id: string }[]> {
  const history = await workflow.fetchHistory();
  return (history.events ?? [])
    .filter((event) => event.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    .map((event) => ({ type: event.activityTaskScheduledEventAttributes?.activityType?.name ?? '', id: event.activityTaskScheduledEventAttributes?.activityId ?? '' }));
}

describe('batch chunks: several short calls per activity', () => {
  it('runs short calls several to an activity, within the concurrency, each id written once', async () => {
    const source = writeTasks(directory, 600, () => 'short', 'short');
    const sink = path.join(directory, 'short.jsonl');
    const handle = await stack.client.startBatch({ source, sink, options: { concurrency: 40 } });
    expect(await handle.result()).toMatchObject({ total: 600, succeeded: 600, failed: 0, runs: 1 });

    expect(sinkCounts(sink)).toEqual({ lines: 600, ids: 600, ok: 600 });
    const requests = requestsOf(handle.batchId);
    expect(requests).toHaveLength(600);
    expect(maxOverlap(requests)).toBeLessThanOrEqual(40);
    const activities = await scheduled(handle.workflow);
    const chunks = activities.filter((activity) => activity.type === 'runBatchChunk');
    const items = activities.filter((activity) => activity.type === 'runBatchItem');
    // The worker has made no calls yet, so the first wave runs an activity per item to learn the calls' length; then
    // chunks take over.
    expect(items.length).toBeGreaterThanOrEqual(1);
    expect(chunks.length).toBeGreaterThan(0);
    expect(chunks.length + items.length).toBeLessThan(300);
  });

  it('chunks a batch from its first wave once the worker has made calls of the model lately, each slot taking an equal share', async () => {
    // The test before made 600 calls of the default model on this worker, so its scan reports how long they take.
    const source = writeTasks(directory, 400, () => 'x', 'warm');
    const sink = path.join(directory, 'warm.jsonl');
    const handle = await stack.client.startBatch({ source, sink, options: { concurrency: 40 } });
    expect(await handle.result()).toMatchObject({ succeeded: 400, runs: 1 });
    expect(sinkCounts(sink)).toEqual({ lines: 400, ids: 400, ok: 400 });
    expect(maxOverlap(requestsOf(handle.batchId))).toBeLessThanOrEqual(40);

    const history = await handle.workflow.fetchHistory();
    const inputs = (history.events ?? [])
      .map((event) => event.activityTaskScheduledEventAttributes)
      .filter((attributes) => attributes !== undefined && attributes !== null)
      .map((attributes) => ({ type: attributes.activityType?.name ?? '', input: decodePayload(attributes.input?.payloads?.[0]) as Record<string, unknown> }));
    const scanScheduled = (history.events ?? []).find((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'scanBatchSource');
    const scan = (history.events ?? []).find((event) => event.activityTaskCompletedEventAttributes?.scheduledEventId?.toString() === scanScheduled?.eventId?.toString());
    expect(inputs[0].type).toBe('scanBatchSource');
    expect(decodePayload(scan?.activityTaskCompletedEventAttributes?.result?.payloads?.[0])).toMatchObject({ total: 400, typicalCallMs: expect.any(Number) });
    // The scan brought the first page: no page is read from the start of the file.
    expect(inputs.filter((activity) => activity.type === 'readBatchPage' && activity.input.offset === 0)).toHaveLength(0);
    // Calls of about 10 ms: 8 at once per activity from the first wave, not one activity per item. While the calls' length
    // is only the worker's hint, each slot runs 2 in a row; once the batch's own calls answer, each slot takes its equal
    // share of the rest (320 items over 40 slots: 8) in one round of chunks that end together.
    expect(inputs.filter((activity) => activity.type === 'runBatchItem')).toHaveLength(0);
    const chunks = inputs.filter((activity) => activity.type === 'runBatchChunk');
    const shapes = chunks.map((chunk) => [(chunk.input.entries as unknown[]).length, chunk.input.parallel]);
    expect(shapes).toEqual([...Array.from({ length: 5 }, () => [16, 8]), ...Array.from({ length: 5 }, () => [64, 8])]);
  });

  it("gives each item of a chunk its own request deadline (agentTimeoutMs), not the chunk's whole timeout", async () => {
    const prompt = (index: number) => (index === 7 ? 'slow [sim latency=4000]' : 'x');
    const source = writeTasks(directory, 40, prompt, 'deadline');
    const sink = path.join(directory, 'deadline.jsonl');
    const handle = await stack.client.startBatch({ source, sink, options: { concurrency: 8, agentTimeoutMs: 1000, retry: { maximumAttempts: 1 } } });
    expect(await handle.result()).toMatchObject({ succeeded: 39, failed: 1 });
    const lines = new Map(readSink(sink).map((line) => [line.id, line]));
    expect(lines.get('deadline-7')).toMatchObject({ status: 'failed', error: { type: 'Timeout' } });
    expect(lines.get('deadline-7')?.durationMs).toBeLessThan(3000);
    // It was one of a chunk's items (the worker knows the calls are short), so the chunk's timeout covered several calls.
    expect((await scheduled(handle.workflow)).some((activity) => activity.type === 'runBatchChunk' && activity.id === 'chunk:deadline-0')).toBe(true);
  });

  it('runs a chunk item that failed retryably again as its own activity, and writes a non-retryable failure at once', async () => {
    const prompt = (index: number) => (index === 150 || index === 170 ? 'x [sim fault=500 times=1]' : index === 160 ? 'x [sim fault=401]' : 'x');
    const source = writeTasks(directory, 200, prompt, 'mixed');
    const sink = path.join(directory, 'mixed.jsonl');
    const handle = await stack.client.startBatch({ source, sink, options: { concurrency: 20 } });
    expect(await handle.result()).toMatchObject({ succeeded: 199, failed: 1 });

    const lines = new Map(readSink(sink).map((line) => [line.id, line]));
    expect(lines.size).toBe(200);
    expect(lines.get('mixed-150')).toMatchObject({ status: 'ok', attempts: 2 });
    expect(lines.get('mixed-170')).toMatchObject({ status: 'ok', attempts: 2 });
    expect(lines.get('mixed-160')).toMatchObject({ status: 'failed', attempts: 1, error: { type: 'Unauthorized' } });
    expect(requestsOf(handle.batchId).filter((request) => request.taskId === 'mixed-160')).toHaveLength(1);
    const activities = await scheduled(handle.workflow);
    // The failed items were in chunks, and their second try was an activity of their own.
    expect(activities.filter((activity) => activity.type === 'runBatchChunk').length).toBeGreaterThan(0);
    expect(activities.filter((activity) => activity.id === 'item:mixed-150' || activity.id === 'item:mixed-170')).toHaveLength(2);
  });

  it('runs an activity per item with itemsPerActivity 1', async () => {
    const source = writeTasks(directory, 60, () => 'x', 'single');
    const handle = await stack.client.startBatch({ source, sink: path.join(directory, 'single.jsonl'), options: { concurrency: 20, itemsPerActivity: 1 } });
    expect(await handle.result()).toMatchObject({ succeeded: 60 });
    const activities = await scheduled(handle.workflow);
    expect(activities.filter((activity) => activity.type === 'runBatchChunk')).toHaveLength(0);
    expect(activities.filter((activity) => activity.type === 'runBatchItem')).toHaveLength(60);
  });

  it('aborts the calls of the chunks in flight when cancelled; a resume writes each id exactly once', async () => {
    const source = writeTasks(directory, 400, () => 'x [sim latency=150]', 'cancelled');
    const sink = path.join(directory, 'cancelled.jsonl');
    const handle = await stack.client.startBatch({ source, sink, options: { concurrency: 40 } });
    await waitFor('chunks in flight', async () => (await scheduled(handle.workflow)).some((activity) => activity.type === 'runBatchChunk'));
    await handle.cancel();
    await expect(handle.result()).rejects.toThrow();
    const open = requestsOf(handle.batchId).filter((request) => request.respondedAt === undefined && request.clientClosedAt === undefined);
    expect(open).toHaveLength(0);
    const written = sinkCounts(sink);
    expect(written.lines).toBe(written.ids);
    expect(written.lines).toBeLessThan(400);

    const resumed = await (await stack.client.resumeBatch(handle.batchId)).result();
    expect(resumed.succeeded + resumed.alreadyOk).toBe(400);
    expect(sinkCounts(sink)).toEqual({ lines: 400, ids: 400, ok: 400 });
  });

  it('completes after its worker is SIGKILLed with chunks in flight: each id once, calls repeated only for the chunks it held', async () => {
    const taskQueue = uniqueName('chunk-kill');
    const env = { OPENAI_BASE_URL: servers.simulator.baseUrl, OPENAI_API_KEY: 'test-key' };
    workers.push(await spawnWorker({ address: servers.server.address, taskQueue, env }));
    const source = writeTasks(directory, 600, () => 'x [sim latency=100]', 'chunk-kill');
    const sink = path.join(directory, 'chunk-kill.jsonl');
    const client = await FanoutClient.connect({ client: servers.server.client, taskQueue });
    const handle = await client.startBatch({ source, sink, options: { concurrency: 24 } });
    await waitFor('a third of the batch, in chunks', async () => (await handle.progress()).done >= 200, { timeoutMs: 60_000 });
    await workers[0].kill();
    // The items of the chunks that were scheduled and not completed when the worker died: at most these run twice.
    const held = await itemsInOpenChunks(handle.workflow);
    workers.push(await spawnWorker({ address: servers.server.address, taskQueue, env }));

    expect(await handle.result()).toMatchObject({ total: 600, succeeded: 600, failed: 0 });
    expect(sinkCounts(sink)).toEqual({ lines: 600, ids: 600, ok: 600 });
    expect(held).toBeGreaterThan(0);
    const requests = requestsOf(handle.batchId);
    expect(requests.length - new Set(requests.map((request) => request.taskId)).size).toBeLessThanOrEqual(held);
  });

  it('refuses itemsPerActivity over 16 before starting', async () => {
    const source = writeTasks(directory, 3, () => 'x', 'refused');
    const cli = await runCli(['batch', 'start', source, '--out', path.join(directory, 'refused.jsonl'), '--items-per-activity', '17', '--address', servers.server.address, '--task-queue', stack.taskQueue]);
    expect(cli.code).toBe(2);
    expect(cli.stderr).toContain('--items-per-activity');
    expect(execFileSync('ls', [directory], { encoding: 'utf8' })).not.toContain('refused.jsonl');
  });
});
