import { existsSync, readdirSync, renameSync } from 'node:fs';
import type { BatchHandle } from '../src/client/batch-client';
import { describeError } from '../src/cli/errors';
import type { BatchProgress } from '../src/contract/batch';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import { batchDirectory, readSink, sinkCounts, startTaskBatch, writeTasks } from './support/batch-files';
import { lanesStoppedAt } from './support/history';
import { maxOverlap } from './support/overlap';
import { useTestStack } from './support/suite-stack';
import { startTestServers, startTestWorker, uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';
import { droppedAnswers } from './support/request-ledger';

const directory = batchDirectory();

const suite = useTestStack({
  simulator: { latency: { minMs: 10, maxMs: 60 } },
  worker: { heartbeatThrottleMs: 500 },
});

/** The batch's progress once `holds` is true of it (within a minute). */
async function progressWhen(
  handle: BatchHandle,
  what: string,
  holds: (progress: BatchProgress) => boolean,
): Promise<BatchProgress> {
  return waitFor(
    what,
    async () => {
      const current = await handle.progress();
      return holds(current) ? current : undefined;
    },
    { timeoutMs: 60_000 },
  );
}

function requestsOf(batchId: string) {
  return suite.servers.simulator.log().filter((request) => request.workflowId === batchId);
}

/** Ids answered (200) before `at`, each with how many requests the simulator saw for it over the whole run. */
function answeredBefore(batchId: string, at: number): Map<string, number> {
  const requests = requestsOf(batchId);
  const answered = new Set(
    requests
      .filter((request) => request.outcome === 200 && (request.respondedAt ?? Infinity) <= at)
      .map((request) => request.taskId),
  );
  return new Map([...answered].map((id) => [id, requests.filter((request) => request.taskId === id).length]));
}

describe('batch', () => {
  it('runs 1,000 items with never more than 50 calls in flight and writes exactly one line per id', async () => {
    const { handle, sink } = await startTaskBatch(suite.stack.client, 'thousand', 1000, 'x [sim latency=200]', {
      concurrency: 50,
    });
    const summary = await handle.result();

    expect(summary).toMatchObject({ total: 1000, succeeded: 1000, failed: 0, notRun: 0 });
    expect(sinkCounts(sink)).toEqual({ lines: 1000, ids: 1000, ok: 1000 });
    const requests = requestsOf(handle.batchId);
    expect(requests).toHaveLength(1000);
    expect(maxOverlap(requests)).toBeLessThanOrEqual(50);
    expect(maxOverlap(requests)).toBeGreaterThanOrEqual(45);
    expect(readSink(sink)[0].output).toContain('[simulated]');
    expect(summary.largestRunHistory).toBeLessThan(10_240);
  });

  it('hands over to a new window several times and still answers progress across windows', async () => {
    const { handle, sink } = await startTaskBatch(suite.stack.client, 'rolling', 300, 'slow [sim latency=150]', {
      concurrency: 10,
      pageSize: 25,
      pagesPerRun: 2,
    });
    const progress = await progressWhen(handle, 'the batch to be in its third run', (current) => current.runs >= 3);
    expect(progress.total).toBe(300);
    // Progress adds up the windows that ended and those still running.
    const later = await progressWhen(handle, '100 items done across windows', (current) => current.done >= 100);
    expect(later.callsPerSecond).toBeGreaterThan(0);
    expect(later.etaSeconds).not.toBeNull();
    const summary = await handle.result();
    expect(summary.runs).toBe(6);
    expect(sinkCounts(sink)).toEqual({ lines: 300, ids: 300, ok: 300 });
  });

  it('attaches to an existing batch id instead of running it twice', async () => {
    const source = writeTasks(directory, 20, () => 'x [sim latency=300]', 'attach');
    const sink = path.join(directory, 'attach.jsonl');
    const batchId = uniqueName('attach');
    const first = await suite.stack.client.startBatch({ source, sink, batchId, options: { concurrency: 5 } });
    const second = await suite.stack.client.startBatch({ source, sink, batchId, options: { concurrency: 5 } });
    expect([first.attached, second.attached]).toEqual([false, true]);
    await second.result();
    const third = await suite.stack.client.startBatch({ source, sink, batchId });
    expect(third.attached).toBe(true);
    expect(requestsOf(batchId)).toHaveLength(20);
    expect(sinkCounts(sink).lines).toBe(20);
  });

  it('completes every item despite injected 429s, 5xx, resets and hangs, never retrying before Retry-After', async () => {
    const faulty = await startTestServers({
      simulator: {
        seed: 'faults',
        latency: { minMs: 5, maxMs: 30 },
        faultRates: { '429': 0.04, '500': 0.04, '503': 0.03, reset: 0.03, hang: 0.02 },
        retryAfterSeconds: 1,
      },
    });
    const worker = await startTestWorker(faulty, { heartbeatThrottleMs: 500 });
    try {
      const { handle, sink } = await startTaskBatch(worker.client, 'faults', 300, undefined, {
        concurrency: 30,
        agentTimeoutMs: 2000,
        retry: { maximumAttempts: 20, initialIntervalMs: 100, maximumIntervalMs: 500 },
      });
      const summary = await handle.result();
      expect(summary).toMatchObject({ succeeded: 300, failed: 0 });
      expect(sinkCounts(sink)).toEqual({ lines: 300, ids: 300, ok: 300 });
      const log = faulty.simulator.log();
      const faults = new Set(log.map((request) => request.fault).filter(Boolean));
      expect([...faults].sort()).toEqual(['429', '500', '503', 'hang', 'reset']);
      for (const limited of log.filter((request) => request.outcome === 429)) {
        const next = log.find(
          (request) => request.taskId === limited.taskId && request.taskRequest === limited.taskRequest + 1,
        );
        expect(next).toBeDefined();
        expect((next?.arrivedAt ?? 0) - (limited.respondedAt ?? 0)).toBeGreaterThanOrEqual(1000);
      }
    } finally {
      await worker.stop();
      await faulty.stop();
    }
  });

  it('keeps every finished result when cancelled, and a resume runs only the rest', async () => {
    const { handle, sink } = await startTaskBatch(suite.stack.client, 'cancel', 40, 'x [sim latency=3000]', {
      concurrency: 10,
    });
    await waitFor('about a quarter done', async () => (await handle.progress()).done >= 10);
    const cancelledAt = Date.now();
    await handle.cancel();
    const cancelReturnedAt = Date.now();
    const error = await handle.result().catch((caught: unknown) => caught);
    expect((error as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    const afterCancel = sinkCounts(sink);
    expect(afterCancel.lines).toBe(afterCancel.ids);
    expect(afterCancel.lines).toBeGreaterThanOrEqual(10);
    expect(afterCancel.lines).toBeLessThan(40);
    // The calls in flight at the cancel were aborted, well before their 3 s were up.
    const aborted = requestsOf(handle.batchId).filter((request) => request.clientClosedAt !== undefined);
    expect(aborted.length).toBeGreaterThan(0);
    for (const request of aborted) expect((request.clientClosedAt ?? 0) - cancelledAt).toBeLessThan(2500);

    // Once cancel has returned, no call of the batch starts, and none is left open.
    expect(requestsOf(handle.batchId).filter((request) => request.arrivedAt > cancelReturnedAt)).toEqual([]);
    expect(
      requestsOf(handle.batchId).filter(
        (request) => request.respondedAt === undefined && request.clientClosedAt === undefined,
      ),
    ).toEqual([]);
    // Every call answered before the cancel is in the sink.
    const answered = answeredBefore(handle.batchId, cancelledAt);
    expect(droppedAnswers(requestsOf(handle.batchId), new Set(readSink(sink).map((line) => line.id)))).toEqual([]);

    const resumed = await suite.stack.client.resumeBatch(handle.batchId);
    const summary = await resumed.result();
    expect(summary).toMatchObject({ alreadyOk: afterCancel.ok, total: 40 - afterCancel.ok, failed: 0 });
    expect(sinkCounts(sink)).toEqual({ lines: 40, ids: 40, ok: 40 });
    // Every id answered before the cancel had exactly one request over the whole batch, resume included.
    expect([...answered.entries()].filter(([, requests]) => requests !== 1)).toEqual([]);
  });

  it('writes failed items as failed, and a resume re-runs only them', async () => {
    const { handle, sink } = await startTaskBatch(suite.stack.client, 'failures', 30, (index) =>
      index % 10 === 3 ? 'x [sim fault=401 times=1]' : 'x',
    );
    const summary = await handle.result();
    expect(summary).toMatchObject({ succeeded: 27, failed: 3 });
    const failedLines = readSink(sink).filter((line) => line.status === 'failed');
    expect(failedLines.map((line) => line.id).sort()).toEqual(['failures-13', 'failures-23', 'failures-3']);
    expect(failedLines[0].error?.type).toBe('Unauthorized');
    const resumed = await (await suite.stack.client.resumeBatch(handle.batchId)).result();
    expect(resumed).toMatchObject({ total: 3, succeeded: 3, alreadyOk: 27 });
    expect(sinkCounts(sink)).toEqual({ lines: 30, ids: 30, ok: 30 });
    // Resumed once more, with every item ok (as after a cancel that landed as the last answers came back): nothing
    // to run, nothing sent, the sink kept.
    const sent = requestsOf(handle.batchId).length;
    const again = await (await suite.stack.client.resumeBatch(handle.batchId)).result();
    expect(again).toMatchObject({ total: 0, succeeded: 0, failed: 0, alreadyOk: 30 });
    expect(requestsOf(handle.batchId)).toHaveLength(sent);
    expect(sinkCounts(sink)).toEqual({ lines: 30, ids: 30, ok: 30 });
  });

  it('stops at its token budget: nothing more starts, the calls in flight are cancelled, and a resume runs the rest', async () => {
    const { handle, sink } = await startTaskBatch(
      suite.stack.client,
      'budget',
      40,
      // 11 tokens an answer: the ten short calls (two lanes of five) pass the budget while the others' calls run on for
      // seconds, so the stop finds calls to abort however slowly it reaches the worker.
      (index) => `budget words here [sim latency=${index < 10 ? 300 : 5000}]`,
      { concurrency: 4, tokenBudget: 60 },
    );
    const summary = await handle.result();
    expect(summary.stoppedBy).toBe('budget');
    expect(summary.tokens.total).toBeGreaterThanOrEqual(60);
    expect(summary.notRun).toBeGreaterThan(20);
    expect(sinkCounts(sink)).toEqual({ lines: summary.succeeded, ids: summary.succeeded, ok: summary.succeeded });
    // The calls that were running when the budget was reached were aborted, not left to finish.
    const closed = requestsOf(handle.batchId).filter((request) => request.clientClosedAt !== undefined);
    expect(closed.length).toBeGreaterThan(0);
    // Every answered call is in the sink and in the cost: the summary counts what the simulator answered.
    expect(droppedAnswers(requestsOf(handle.batchId), new Set(readSink(sink).map((line) => line.id)))).toEqual([]);
    expect(summary.tokens.total).toBe(readSink(sink).reduce((sum, line) => sum + (line.usage?.totalTokens ?? 0), 0));

    const resumed = await (
      await suite.stack.client.resumeBatch(handle.batchId, { tokenBudget: 1_000_000, concurrency: 30 })
    ).result();
    expect(resumed.stoppedBy).toBeUndefined();
    expect(sinkCounts(sink)).toEqual({ lines: 40, ids: 40, ok: 40 });
  });

  it('fails with SourceChanged, keeping what it finished, when the task file is rewritten under it', async () => {
    const { handle, source, sink } = await startTaskBatch(suite.stack.client, 'changing', 60, 'x [sim latency=300]', {
      concurrency: 2,
    });
    await waitFor('a few results', async () => (await handle.progress()).done >= 4, { timeoutMs: 30_000 });
    // Same offsets, other ids: an item reading its line now finds a task the page never named.
    writeTasks(directory, 60, () => 'x [sim latency=300]', 'changinG');
    renameSync(path.join(directory, 'changinG-60.jsonl'), source);
    const failure = await handle.result().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect(describeError(failure)).toContain('changed while the batch ran');
    // What finished before is in the sink, and of the spool only the mark that the sink is whole is left.
    expect(sinkCounts(sink).ok).toBeGreaterThanOrEqual(4);
    expect(
      readdirSync(`${sink}.parts`, { recursive: true }).filter(
        (name) => String(name).endsWith('.json') || String(name).endsWith('.jsonl'),
      ),
    ).toEqual([expect.stringMatching(/FINISHED\.json$/)]);
  });

  it.each([
    ['one window', {}],
    ['two stripes (windowCalls 2)', { windowCalls: 2 }],
  ])(
    'recovers every answered result of a terminated batch into its sink when its status is asked (%s)',
    async (_, stripes) => {
      const { handle, sink } = await startTaskBatch(suite.stack.client, 'terminated', 80, 'x [sim latency=250]', {
        concurrency: 4,
        ...stripes,
      });
      await waitFor('a few results', async () => (await handle.progress()).done >= 12, { timeoutMs: 30_000 });
      await handle.workflow.terminate('operator stopped it');
      expect(existsSync(sink)).toBe(false);
      const recovered = await suite.stack.client.recoverStoppedBatch(handle.batchId);
      expect(recovered?.sink).toBe(sink);
      const counts = sinkCounts(sink);
      expect(counts.ok).toBeGreaterThanOrEqual(8);
      expect(counts.ids).toBe(counts.lines);
      expect(existsSync(`${sink}.parts`)).toBe(false);
      // Recovered once the windows had closed (their lanes cancelled with them): every call answered is in the sink, and
      // none is still open.
      const written = new Set(readSink(sink).map((line) => line.id));
      expect(
        droppedAnswers(requestsOf(handle.batchId), written, { stopAt: await lanesStoppedAt(handle.workflow) }),
      ).toEqual([]);
      expect(
        requestsOf(handle.batchId).filter((request) => request.outcome === undefined && !request.clientClosedAt),
      ).toEqual([]);
      const resumed = await (await suite.stack.client.resumeBatch(handle.batchId)).result();
      if ('windowCalls' in stripes) {
        // Both stripes' answers were recovered: items of each half of the file were in the sink before the resume.
        expect([...written].some((id) => Number(id.split('-')[1]) < 40)).toBe(true);
        expect([...written].some((id) => Number(id.split('-')[1]) >= 40)).toBe(true);
      }
      expect(resumed.alreadyOk).toBe(counts.ok);
      expect(sinkCounts(sink)).toEqual({ lines: 80, ids: 80, ok: 80 });
    },
  );

  it('refuses a malformed task file before starting, naming the line', async () => {
    const bad = path.join(directory, 'bad.jsonl');
    require('node:fs').writeFileSync(bad, '{"id":"a","prompt":"x"}\n{"id":"b"}\n{"id":"a","prompt":"y"}\nnot json\n');
    const error = await suite.stack.client
      .startBatch({ source: bad, sink: path.join(directory, 'bad-out.jsonl') })
      .catch((caught: unknown) => caught);
    expect(String(error)).toContain('bad.jsonl line 2: prompt: is required');
    expect(String(error)).toContain('bad.jsonl line 3: id: duplicate id "a" (first at line 1)');
    expect(String(error)).toContain('bad.jsonl line 4: not valid JSON');
  });
});
