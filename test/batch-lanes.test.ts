import { execFileSync } from 'node:child_process';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { batchDirectory, readSink, sinkCounts, startTaskBatch, writeTasks } from './support/batch-files';
import { childWorkflowIds, decodePayload, lanesStoppedAt } from './support/history';
import { maxOverlap } from './support/overlap';
import {
  answeredIds,
  droppedAnswers,
  faultCost,
  fewestOpenBetweenFirstAndLast,
  requestsOfRun,
} from './support/request-ledger';
import { runBatchStart, spawnWorker } from './support/processes';
import { FanoutClient } from '../src/client/fanout-client';
import { useTestStack } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

const directory = batchDirectory();

const suite = useTestStack({ simulator: { latency: { minMs: 10, maxMs: 10 } } });

const requestsOf = (batchId: string) => requestsOfRun(suite.servers.simulator.log(), batchId);

/** The lane activities the batch's windows scheduled: id and how many items each took. */
async function lanesOf(workflow: WorkflowHandle): Promise<{ id: string; items: number }[]> {
  const lanes: { id: string; items: number }[] = [];
  for (const id of childWorkflowIds(await workflow.fetchHistory())) {
    const window = await workflow.client.getHandle(id).fetchHistory();
    for (const event of window.events ?? []) {
      if (event.eventType !== temporal.api.enums.v1.EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) continue;
      const attributes = event.activityTaskScheduledEventAttributes;
      if (attributes?.activityType?.name !== 'runBatchLane') continue;
      const input = decodePayload(attributes.input?.payloads?.[0]) as { entries: unknown[] };
      lanes.push({ id: attributes.activityId ?? '', items: input.entries.length });
    }
  }
  return lanes;
}

/** The input of each window the batch started: its number and the calls lent to it. */
async function windowInputsOf(workflow: WorkflowHandle): Promise<{ window: number; lent?: number }[]> {
  const history = await workflow.fetchHistory();
  return (history.events ?? []).flatMap((event) => {
    const attributes = event.startChildWorkflowExecutionInitiatedEventAttributes;
    return attributes ? [decodePayload(attributes.input?.payloads?.[0]) as { window: number; lent?: number }] : [];
  });
}

describe('batch lanes: several calls one after another per activity, each answer journaled', () => {
  it('runs short calls many to an activity, within the concurrency, each id written once', async () => {
    const { handle, sink } = await startTaskBatch(suite.stack.client, 'short', 600, 'short', { concurrency: 20 });
    expect(await handle.result()).toMatchObject({ total: 600, succeeded: 600, failed: 0 });
    expect(sinkCounts(sink)).toEqual({ lines: 600, ids: 600, ok: 600 });
    const requests = requestsOf(handle.batchId);
    expect(requests).toHaveLength(600);
    expect(maxOverlap(requests)).toBeLessThanOrEqual(20);
    const lanes = await lanesOf(handle.workflow);
    expect(lanes.reduce((sum, lane) => sum + lane.items, 0)).toBe(600);
    expect(lanes.length).toBeLessThan(200);
  });

  it.each([
    ['one chain of windows', {}],
    ['three stripes side by side, each a chain (windowCalls 4)', { windowCalls: 4 }],
  ])(
    'keeps its calls in flight across hand-overs between windows, %s: never zero while items remain, never over the concurrency',
    async (_, stripes) => {
      const { handle, sink } = await startTaskBatch(
        suite.stack.client,
        'window',
        240,
        // Calls of 0.6-1.4 s: a successor's first call comes a chain of workflow tasks after its hand-over (the
        // batch's, the successor's, its lanes' dispatch), which on a loaded 2-core machine took longer than the old
        // window's last calls of 0.2-0.6 s; model calls last seconds.
        (index) => `x [sim latency=${600 + (index % 5) * 200}]`,
        { concurrency: 12, pageSize: 20, pagesPerRun: 2, ...stripes },
      );
      const summary = await handle.result();
      expect(summary).toMatchObject({ total: 240, succeeded: 240 });
      expect(summary.runs).toBeGreaterThanOrEqual('windowCalls' in stripes ? 6 : 4);
      expect(sinkCounts(sink)).toEqual({ lines: 240, ids: 240, ok: 240 });
      const requests = requestsOf(handle.batchId);
      expect(requests).toHaveLength(240);
      expect(maxOverlap(requests)).toBeLessThanOrEqual(12);
      expect(fewestOpenBetweenFirstAndLast(requests)).toBeGreaterThan(0);
    },
  );

  it.each([
    ['in one window each', {}],
    ['across hand-overs between windows', { pageSize: 10, pagesPerRun: 1 }],
  ])(
    'lends the calls of a stripe that ran out of items to the stripe still running, %s, never over the concurrency',
    async (_, windows) => {
      // Two stripes of 60 items and 4 calls each (concurrency 8, windowCalls 4): the first stripe's calls take 20 ms,
      // the second's 1 s, so the first runs out of items while the second has most of its items still to start.
      const { handle, sink } = await startTaskBatch(
        suite.stack.client,
        'lend',
        120,
        (index) => `x [sim latency=${index < 60 ? 20 : 1000}]`,
        // Lanes of at most 4 items: lanes a quarter of a stripe deep (when the worker knows short calls from the tests
        // before) would run the stripe's last items one after another, whatever was lent.
        { concurrency: 8, windowCalls: 4, itemsPerActivity: 4, ...windows },
      );
      const summary = await handle.result();
      expect(summary).toMatchObject({ total: 120, succeeded: 120, failed: 0 });
      expect(summary.runs).toBeGreaterThanOrEqual('pageSize' in windows ? 4 : 2);
      expect(sinkCounts(sink)).toEqual({ lines: 120, ids: 120, ok: 120 });
      const requests = requestsOf(handle.batchId);
      expect(requests).toHaveLength(120);
      expect(maxOverlap(requests)).toBeLessThanOrEqual(8);
      // The second stripe's share is 4 calls; with the first stripe's 4 lent to it, it ran 8 at once.
      const second = requests.filter((request) => Number(request.taskId.split('-')[1]) >= 60);
      expect(maxOverlap(second)).toBe(8);
      // The batch lent them (two stripes, not one window of 8).
      const signals = ((await handle.workflow.fetchHistory()).events ?? []).flatMap(
        (event) => event.signalExternalWorkflowExecutionInitiatedEventAttributes?.signalName ?? [],
      );
      expect(signals).toContain('slotsLent');
      const started = await windowInputsOf(handle.workflow);
      expect(new Set(started.map((input) => input.window % 2))).toEqual(new Set([0, 1]));
      if ('pageSize' in windows) {
        // The stripe's last window, started long after the lend, still had them: each hand-over passed them on.
        const last = Math.max(...started.filter((input) => input.window % 2 === 1).map((input) => input.window));
        expect(last).toBeGreaterThan(3);
        expect(started.find((input) => input.window === last)?.lent).toBe(4);
      }
    },
  );

  it('lends a window at most its windowCalls again: the last of three stripes runs 4 calls, not all 6', async () => {
    // Three stripes of 2 calls (concurrency 6, windowCalls 2); the first two run out of items early.
    const { handle } = await startTaskBatch(
      suite.stack.client,
      'lendcap',
      90,
      (index) => `x [sim latency=${index < 60 ? 20 : 600}]`,
      { concurrency: 6, windowCalls: 2, itemsPerActivity: 2 },
    );
    expect(await handle.result()).toMatchObject({ total: 90, succeeded: 90, failed: 0 });
    const requests = requestsOf(handle.batchId);
    expect(requests).toHaveLength(90);
    const third = requests.filter((request) => Number(request.taskId.split('-')[1]) >= 60);
    expect(maxOverlap(third)).toBe(4);
  });

  it("spreads a concurrency above one worker's slots over the workers polling the queue: 40 in flight on four workers of 10", async () => {
    const taskQueue = uniqueName('spread');
    const env = {
      OPENAI_BASE_URL: suite.servers.simulator.baseUrl,
      OPENAI_API_KEY: 'test-key',
      FANOUT_MAX_CONCURRENT_ACTIVITIES: '10',
    };
    const workers = await Promise.all(
      Array.from({ length: 4 }, () => spawnWorker({ address: suite.servers.server.address, taskQueue, env })),
    );
    try {
      const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
      const { handle, sink } = await startTaskBatch(client, 'spread', 160, 'x [sim latency=1500]', {
        concurrency: 40,
      });
      expect(await handle.result()).toMatchObject({ total: 160, succeeded: 160 });
      expect(sinkCounts(sink)).toEqual({ lines: 160, ids: 160, ok: 160 });
      // No worker runs more than 10 calls at once: 40 at once means all four took their share.
      expect(maxOverlap(requestsOf(handle.batchId))).toBe(40);
    } finally {
      await Promise.all(workers.map((worker) => worker.stop()));
    }
  });

  it('runs an item that failed retryably in a lane again on its own, sending its real attempt, and writes a non-retryable failure at once', async () => {
    const prompt = (index: number) =>
      index === 150 || index === 170 ? 'x [sim fault=500 times=1]' : index === 160 ? 'x [sim fault=401]' : 'x';
    const { handle, sink } = await startTaskBatch(suite.stack.client, 'mixed', 200, prompt, { concurrency: 10 });
    expect(await handle.result()).toMatchObject({ succeeded: 199, failed: 1 });
    const lines = new Map(readSink(sink).map((line) => [line.id, line]));
    expect(lines.size).toBe(200);
    expect(lines.get('mixed-150')).toMatchObject({ status: 'ok', attempts: 2 });
    expect(lines.get('mixed-160')).toMatchObject({ status: 'failed', attempts: 1, error: { type: 'Unauthorized' } });
    const requests = requestsOf(handle.batchId);
    expect(requests.filter((request) => request.taskId === 'mixed-160')).toHaveLength(1);
    expect(requests.filter((request) => request.taskId === 'mixed-150').map((request) => request.attempt)).toEqual([
      1, 2,
    ]);
    expect(requests.filter((request) => request.taskId === 'mixed-170').map((request) => request.attempt)).toEqual([
      1, 2,
    ]);
  });

  it("gives each item of a lane its own request deadline (agentTimeoutMs), not the lane's whole timeout", async () => {
    const prompt = (index: number) => (index === 7 ? 'slow [sim latency=4000]' : 'x');
    const { handle, sink } = await startTaskBatch(suite.stack.client, 'deadline', 40, prompt, {
      concurrency: 2,
      agentTimeoutMs: 1000,
      retry: { maximumAttempts: 1 },
    });
    expect(await handle.result()).toMatchObject({ succeeded: 39, failed: 1 });
    const lines = new Map(readSink(sink).map((line) => [line.id, line]));
    expect(lines.get('deadline-7')).toMatchObject({ status: 'failed', error: { type: 'Timeout' } });
    expect(lines.get('deadline-7')?.durationMs).toBeLessThan(3000);
    expect((await lanesOf(handle.workflow)).some((lane) => lane.items > 1)).toBe(true);
  });

  it('runs an activity per item with itemsPerActivity 1', async () => {
    const source = writeTasks(directory, 60, () => 'x', 'single');
    const handle = await suite.stack.client.startBatch({
      source,
      sink: path.join(directory, 'single.jsonl'),
      options: { concurrency: 20, itemsPerActivity: 1 },
    });
    expect(await handle.result()).toMatchObject({ succeeded: 60 });
    const lanes = await lanesOf(handle.workflow);
    expect(lanes).toHaveLength(60);
    expect(lanes.every((lane) => lane.items === 1)).toBe(true);
  });

  it.each([
    ['one window', {}],
    ['two stripes (windowCalls 4)', { windowCalls: 4 }],
  ])(
    'cancelled mid-lane (%s), keeps every answer: in the sink, never sent again on resume, nothing open and nothing started after',
    async (_, stripes) => {
      const { handle, sink } = await startTaskBatch(suite.stack.client, 'cancelled', 300, 'x [sim latency=250]', {
        concurrency: 8,
        ...stripes,
      });
      await waitFor('deep lanes answering', () => answeredIds(requestsOf(handle.batchId)).size >= 60);
      expect(Math.max(...(await lanesOf(handle.workflow)).map((lane) => lane.items))).toBeGreaterThan(1);
      const cancelledAt = Date.now();
      await handle.cancel();
      const returnedAt = Date.now();
      await expect(handle.result()).rejects.toThrow();
      const atCancel = requestsOf(handle.batchId);
      expect(atCancel.filter((request) => request.arrivedAt > returnedAt)).toEqual([]);
      expect(faultCost(atCancel, returnedAt).openNow).toBe(0);
      // The calls open at the cancel were aborted within seconds, not left to answer. Loose: the cancel goes from the
      // batch to each stripe's window to its lanes, workflow task by workflow task, and a loaded CI machine took 3.2 s.
      for (const request of atCancel.filter((request) => request.clientClosedAt !== undefined))
        expect((request.clientClosedAt ?? 0) - cancelledAt).toBeLessThan(10_000);
      expect(
        droppedAnswers(atCancel, new Set(readSink(sink).map((line) => line.id)), {
          stopAt: await lanesStoppedAt(handle.workflow),
        }),
      ).toEqual([]);

      const resumed = await (await suite.stack.client.resumeBatch(handle.batchId)).result();
      expect(resumed.succeeded + resumed.alreadyOk).toBe(300);
      expect(sinkCounts(sink)).toEqual({ lines: 300, ids: 300, ok: 300 });
      expect(faultCost(requestsOf(handle.batchId), cancelledAt).answeredThenResent).toEqual([]);
      if ('windowCalls' in stripes) {
        // Both stripes were running when the cancel came: each had answers of its own in the sink.
        const ids = readSink(sink).map((line) => Number(line.id.split('-')[1]));
        expect(ids.some((index) => index < 150) && ids.some((index) => index >= 150)).toBe(true);
      }
    },
  );

  it.each([
    ['one window', {}],
    ['two stripes (windowCalls 4), the failure in the first', { windowCalls: 4 }],
  ])(
    'fails fast with lanes in flight (%s): every answered call is in the sink and the cost, none is left open',
    async (_, stripes) => {
      // Items of the second stripe (200 on) run 300 ms: the first stripe's failure comes long before they could all end.
      const prompt = (index: number) =>
        index === 120 ? 'x [sim fault=403 latency=50]' : `x [sim latency=${index >= 200 ? 300 : 100}]`;
      const { handle, sink } = await startTaskBatch(suite.stack.client, 'failfast', 400, prompt, {
        concurrency: 8,
        errorPolicy: 'fail-fast',
        ...stripes,
      });
      const summary = await handle.result();
      expect(summary.stoppedBy).toBe('fail-fast');
      expect(summary.failed).toBe(1);
      expect(summary.notRun).toBeGreaterThan(0);
      const requests = requestsOf(handle.batchId);
      expect(faultCost(requests, Date.now()).openNow).toBe(0);
      const lines = readSink(sink);
      const written = new Set(lines.filter((line) => line.status === 'ok').map((line) => line.id));
      expect(droppedAnswers(requests, written, { stopAt: await lanesStoppedAt(handle.workflow) })).toEqual([]);
      expect(summary.succeeded).toBe(written.size);
      expect(summary.tokens.total).toBe(lines.reduce((sum, line) => sum + (line.usage?.totalTokens ?? 0), 0));
      expect(summary.succeeded + summary.failed + summary.notRun).toBe(400);
      if ('windowCalls' in stripes) {
        // The second stripe was stopped too, not left to run its items after the first one failed.
        const secondStripe = requests.filter((request) => Number(request.taskId.split('-')[1]) >= 200);
        expect(secondStripe.length).toBeGreaterThan(0);
        expect(secondStripe.length).toBeLessThan(200);
      }
    },
  );

  it('fails fast from inside a lane: the lane takes no item after the failure, and returns at once', async () => {
    // One call at a time: after the first lane (8 items, call length unknown) the rest would go in one deep lane.
    const prompt = (index: number) => (index === 10 ? 'x [sim fault=403]' : 'x');
    const { handle, sink } = await startTaskBatch(suite.stack.client, 'lanefail', 50, prompt, {
      concurrency: 1,
      errorPolicy: 'fail-fast',
    });
    const summary = await handle.result();
    expect(summary).toMatchObject({ stoppedBy: 'fail-fast', succeeded: 10, failed: 1, notRun: 39 });
    expect(requestsOf(handle.batchId).map((request) => request.taskId)).toEqual(
      Array.from({ length: 11 }, (_, index) => `lanefail-${index}`),
    );
    expect(Math.max(...(await lanesOf(handle.workflow)).map((lane) => lane.items))).toBeGreaterThan(11);
    expect(sinkCounts(sink)).toEqual({ lines: 11, ids: 11, ok: 10 });
  });

  it('stops at its cost budget with lanes in flight: every answered call counted, a resume pays for none of them again', async () => {
    const { handle, sink } = await startTaskBatch(
      suite.stack.client,
      'lanebudget',
      300,
      'budget words [sim latency=120]',
      { concurrency: 6, tokenBudget: 1500 },
    );
    const summary = await handle.result();
    const stoppedAt = Date.now();
    expect(summary.stoppedBy).toBe('budget');
    const requests = requestsOf(handle.batchId);
    expect(faultCost(requests, stoppedAt).openNow).toBe(0);
    const written = new Set(readSink(sink).map((line) => line.id));
    expect(droppedAnswers(requests, written, { stopAt: await lanesStoppedAt(handle.workflow) })).toEqual([]);
    expect(summary.succeeded).toBe(written.size);
    const resumed = await (await suite.stack.client.resumeBatch(handle.batchId, { tokenBudget: 10_000_000 })).result();
    expect(resumed.alreadyOk).toBe(summary.succeeded);
    expect(sinkCounts(sink)).toEqual({ lines: 300, ids: 300, ok: 300 });
    // Calls answered while the stop was aborting them were in flight at the stop; anything answered before it is never paid again.
    const abortedAt = Math.min(
      ...requests.flatMap((request) => (request.clientClosedAt === undefined ? [] : [request.clientClosedAt])),
    );
    expect(faultCost(requestsOf(handle.batchId), Math.min(stoppedAt, abortedAt)).answeredThenResent).toEqual([]);
  });

  it('refuses itemsPerActivity over 100 before starting', async () => {
    const source = writeTasks(directory, 3, () => 'x', 'refused');
    const cli = await runBatchStart(source, path.join(directory, 'refused.jsonl'), [
      '--items-per-activity',
      '101',
      ...suite.connectionArgs,
    ]);
    expect(cli.code).toBe(2);
    expect(cli.stderr).toContain('--items-per-activity');
    expect(execFileSync('ls', [directory], { encoding: 'utf8' })).not.toContain('refused.jsonl');
    const zero = await runBatchStart(source, path.join(directory, 'refused.jsonl'), [
      '--window-calls',
      '0',
      ...suite.connectionArgs,
    ]);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toContain('--window-calls');
  });

  it('takes --window-calls from the CLI: concurrency 6 at 3 calls a window runs two stripes side by side', async () => {
    const source = writeTasks(directory, 30, () => 'x [sim latency=100]', 'clistripes');
    const batchId = uniqueName('clistripes');
    const out = path.join(directory, 'clistripes.jsonl');
    const cli = await runBatchStart(source, out, [
      '--id',
      batchId,
      '-c',
      '6',
      '--window-calls',
      '3',
      ...suite.connectionArgs,
    ]);
    expect(cli.code).toBe(0);
    const handle = suite.stack.client.getBatch(batchId);
    expect(await handle.result()).toMatchObject({ total: 30, succeeded: 30 });
    expect(sinkCounts(out)).toEqual({ lines: 30, ids: 30, ok: 30 });
    const windows = childWorkflowIds(await handle.workflow.fetchHistory());
    expect(windows.map((id) => id.split('/').pop()).sort()).toEqual(['window-0', 'window-1']);
    expect(maxOverlap(requestsOf(batchId))).toBeLessThanOrEqual(6);
  });
});
