import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { FanoutClient } from '../src/client/fanout-client';
import { exitOf } from '../src/local/child-processes';
import type { BatchHandle } from '../src/client/batch-client';
import type { BatchOptions } from '../src/contract/batch';
import { PayloadStore } from '../src/store';
import { batchDirectory, writeTasks } from './support/batch-files';
import { faultCost, requestsOfRun } from './support/request-ledger';
import { useS3BehindProxy } from './support/s3-proxy';
import { QUICK_LOST_WORKER_DETECTION, useWorkerProcesses } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

// A worker stopped gracefully (SIGTERM, FANOUT_SHUTDOWN_GRACE_MS) while a batch runs on it, another worker of the queue
// taking over: every item ends in the sink exactly once, no call that had answered is sent again, and nothing the
// stopped worker started runs on after it, nor anything after the batch has ended.

const suite = useWorkerProcesses({ simulator: { latency: { minMs: 20, maxMs: 20 } } });
const directory = batchDirectory();

const behind = useS3BehindProxy();

/** When `child` exited (now, if it already has). */
const exitTimeOf = (child: ChildProcess): Promise<number> => exitOf(child).then(() => Date.now());

/** Two workers on a fresh queue, each naming itself in its calls; the first stops within `graceMs` of its SIGTERM. */
async function twoWorkers(graceMs: number, onS3 = false) {
  const taskQueue = uniqueName('sigterm');
  const env = (name: string) => ({
    FANOUT_WORKER_IDENTITY: `${taskQueue}-${name}`,
    FANOUT_SHUTDOWN_GRACE_MS: String(graceMs),
    ...QUICK_LOST_WORKER_DETECTION,
    ...(onS3 ? { ...behind.env() } : {}),
  });
  const first = await suite.spawnWorker(taskQueue, env('first'));
  const client = await FanoutClient.connect({
    client: suite.servers.server.client,
    taskQueue,
    ...(onS3 ? { store: new PayloadStore(behind.storage, `s3://${behind.bucket}/store`) } : {}),
  });
  return {
    client,
    first,
    firstIdentity: `${taskQueue}-first`,
    startSecond: () => suite.spawnWorker(taskQueue, env('second')),
  };
}

/** The ids of a sink's lines, and how many of them are ok. */
function sinkIds(text: string): { ids: string[]; ok: number } {
  const lines = text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as { id: string; status: string });
  return { ids: lines.map((line) => line.id), ok: lines.filter((line) => line.status === 'ok').length };
}

/**
 * What every ending here must hold once the batch has ended: each item once and ok in the sink, no answered call sent
 * again, no more ids re-sent than were open at the SIGTERM, nothing sent by the stopped worker after it exited, and
 * nothing open now.
 */
async function expectExactlyOnce(
  handle: BatchHandle,
  sinkText: () => Promise<string>,
  count: number,
  stop: { at: number; exitedAt: number; identity: string },
): Promise<void> {
  const summary = await handle.result();
  expect(summary).toMatchObject({ total: count, succeeded: count, failed: 0 });
  const { ids, ok } = sinkIds(await sinkText());
  expect([ids.length, new Set(ids).size, ok]).toEqual([count, count, count]);
  const requests = requestsOfRun(suite.servers.simulator.log(), handle.batchId);
  const cost = faultCost(requests, stop.at);
  expect(cost.answeredThenResent).toEqual([]);
  expect(cost.duplicated).toBeLessThanOrEqual(cost.openAt);
  expect(cost.openNow).toBe(0);
  expect(requests.filter((request) => request.worker === stop.identity && request.arrivedAt > stop.exitedAt)).toEqual(
    [],
  );
}

function prompts(count: number, latencyMs: number, name: string): string {
  return writeTasks(directory, count, () => `x [sim latency=${latencyMs}]`, name);
}

describe('a batch whose worker is SIGTERMed mid-lane', () => {
  it('ends each item once when the worker stops with lanes open, the other worker carrying on from their journals', async () => {
    const { client, first, firstIdentity, startSecond } = await twoWorkers(400);
    const source = prompts(40, 300, 'mid-lane');
    const sink = `${directory}/mid-lane.out.jsonl`;
    const options: BatchOptions = { concurrency: 4, itemsPerActivity: 10 };
    const handle = await client.startBatch({ source, sink, options });
    const answered = () =>
      requestsOfRun(suite.servers.simulator.log(), handle.batchId).filter((request) => request.outcome === 200).length;
    await waitFor('a third of the items answered', () => answered() >= 12);

    const exited = exitTimeOf(first.child);
    first.child.kill('SIGTERM');
    const at = Date.now();
    await startSecond();
    const exitedAt = await exited;
    await expectExactlyOnce(handle, async () => readFileSync(sink, 'utf8'), 40, {
      at,
      exitedAt,
      identity: firstIdentity,
    });
  });
});

describe('a batch whose worker is SIGTERMed mid-seal', () => {
  it('ends each item once when the stopped worker was writing a lane segment to a slow S3', async () => {
    const { client, first, firstIdentity, startSecond } = await twoWorkers(300, true);
    const prefix = `s3://${behind.bucket}/${uniqueName('mid-seal')}`;
    await behind.storage.write(`${prefix}/tasks.jsonl`, readFileSync(prompts(12, 50, 'mid-seal')));
    // The first segment written is held 30 s: past the grace of the worker that writes it, past the 5 s after it by
    // which a stopped worker is gone, and past the retry of its lane on the other worker (once the stopped worker is
    // found lost, some 10 s after its exit), which must carry on from the lane's journal.
    let slowed = false;
    behind.proxy.setRule((method, path) => {
      if (method !== 'PUT' || !path.includes('/seg/') || slowed) return {};
      slowed = true;
      return { delayMs: 30_000 };
    });
    const sink = `${prefix}/results.jsonl`;
    const handle = await client.startBatch({
      source: `${prefix}/tasks.jsonl`,
      sink,
      options: { concurrency: 1, itemsPerActivity: 3 },
    });
    const sealStart = await waitFor('a lane segment on its way to S3', () =>
      behind.proxy.requests.find((request) => request.method === 'PUT' && request.path.includes('/seg/')),
    );
    // One lane at a time: nothing else is in flight while the segment is held. The stop comes once the lane's answers
    // are older than the ledger's settle time (1 s), so a call of that lane sent again counts as an answered call
    // re-sent rather than one in flight at the stop.
    await waitFor('the sealing lane to be past its settle time', () => Date.now() - sealStart.arrivedAt > 1200);

    const exited = exitTimeOf(first.child);
    first.child.kill('SIGTERM');
    const at = Date.now();
    await startSecond();
    const exitedAt = await exited;
    // The worker was gone before its segment landed: the seal was cut off, not waited for.
    const slowSeal = behind.proxy.requests.find(
      (request) => request.method === 'PUT' && request.path.includes('/seg/'),
    );
    expect(slowSeal?.answeredAt ?? Infinity).toBeGreaterThan(exitedAt);
    await expectExactlyOnce(handle, async () => (await behind.storage.read(sink)).toString('utf8'), 12, {
      at,
      exitedAt,
      identity: firstIdentity,
    });
  });
});

describe('a batch whose worker is SIGTERMed mid-hand-over', () => {
  it('ends each item once when the worker stops while an old window and its successor both run', async () => {
    const { client, first, firstIdentity, startSecond } = await twoWorkers(400);
    const source = prompts(60, 200, 'mid-hand-over');
    const sink = `${directory}/mid-hand-over.out.jsonl`;
    const handle = await client.startBatch({
      source,
      sink,
      options: { concurrency: 6, pageSize: 10, pagesPerRun: 1, itemsPerActivity: 3 },
    });
    await waitFor('two windows running at once (a hand-over under way)', async () =>
      ((await handle.progress()).runningWindows ?? []).length >= 2 ? true : undefined,
    );

    const exited = exitTimeOf(first.child);
    first.child.kill('SIGTERM');
    const at = Date.now();
    await startSecond();
    const exitedAt = await exited;
    await expectExactlyOnce(handle, async () => readFileSync(sink, 'utf8'), 60, {
      at,
      exitedAt,
      identity: firstIdentity,
    });
  });
});
