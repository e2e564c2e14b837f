import {
  CancellationScope,
  CancelledFailure,
  continueAsNew,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { FlushItem } from '../batch/result-sink';
import { resolveBatchOptions, type BatchEntry, type BatchInput, type BatchProgress, type BatchState, type BatchSummary } from '../contract/batch';
import { FailureType } from '../contract/failure-types';
import { resolveRunOptions } from '../contract/run-options';
import { validateBatchInput } from '../contract/validation';
import { agentActivities } from './agent-activity';
import { validateOrFail } from './input';
import { batchProgressQuery } from './messages';
import { failed } from './task-outcome';

/** Hard ceiling we keep every run under: Temporal warns at 10,240 events. */
const HISTORY_CEILING = 10_240;

// Source and sink I/O heartbeats every second: a lost worker's page read or flush is retried within seconds.
const io = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '5 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', nonRetryableErrorTypes: [FailureType.InvalidInput, 'SinkChanged'] },
});

/**
 * A long-running batch: items are read from a JSONL file in pages by an activity, run with at most `concurrency`
 * calls in flight (a new one starts as each finishes), and written to a JSONL sink by activities, so neither
 * prompts nor outputs enter history. Each run continues-as-new before its history grows large, carrying the cursor
 * and the counters; a cancelled batch keeps every finished result, and a resume runs only what is not ok yet.
 */
export async function batch(input: BatchInput, carried?: BatchState): Promise<BatchSummary> {
  const parsed = validateOrFail(validateBatchInput, input);
  const { source, sink, batchId } = parsed;
  const runOptions = resolveRunOptions({ ...parsed.options, maxParallel: undefined });
  const options = resolveBatchOptions(parsed.options);
  const agents = agentActivities(runOptions);
  // Each call still in flight when a run stops starting new ones adds events while it drains.
  const historyBudget = Math.max(2000, HISTORY_CEILING - 8 * options.concurrency - 1000);

  let phase: BatchProgress['state'] = carried ? 'running' : 'scanning';
  let inFlight = 0;
  let state: BatchState = carried ?? {
    cursor: 0,
    total: 0,
    alreadyOk: 0,
    succeeded: 0,
    failed: 0,
    tokens: { prompt: 0, completion: 0, total: 0 },
    sinkBytes: 0,
    skipOkBelow: 0,
    committedIds: [],
    startedAtMs: Date.now(),
    runs: 1,
    largestRunHistory: 0,
  };

  setHandler(batchProgressQuery, (): BatchProgress => {
    const done = state.succeeded + state.failed;
    const elapsedMs = Math.max(1, Date.now() - state.startedAtMs);
    const callsPerSecond = (done * 1000) / elapsedMs;
    const remaining = Math.max(0, state.total - done);
    return {
      batchId,
      state: phase,
      total: state.total,
      done,
      succeeded: state.succeeded,
      failed: state.failed,
      inFlight,
      pending: Math.max(0, remaining - inFlight),
      alreadyOk: state.alreadyOk,
      callsPerSecond,
      etaSeconds: callsPerSecond > 0 ? remaining / callsPerSecond : null,
      tokens: state.tokens,
      runs: state.runs,
      historyLength: workflowInfo().historyLength,
      elapsedMs,
    };
  });

  if (!carried) {
    const scan = await io.scanBatchSource({ source, sink, resume: parsed.resume ?? false });
    state = { ...state, total: scan.total, alreadyOk: scan.alreadyOk, sinkBytes: scan.sinkBytes, skipOkBelow: scan.skipOkBelow };
    phase = 'running';
  }
  setCurrentDetails(`batch ${batchId}: ${state.total} items, concurrency ${options.concurrency}`);

  const buffer: BatchEntry[] = [];
  let nextOffset = state.cursor;
  let eof = false;
  let pagesRead = 0;
  let reading: Promise<void> | undefined;
  let rollOver = false;
  const pending: FlushItem[] = [];
  let flushing: Promise<void> = Promise.resolve();
  const scope = new CancellationScope();

  const refill = (): Promise<void> => {
    reading ??= io
      .readBatchPage({ source, sink, offset: nextOffset, limit: options.pageSize, skipOkBelow: state.skipOkBelow })
      .then((page) => {
        buffer.push(...page.entries);
        nextOffset = page.nextOffset;
        eof = page.eof;
        pagesRead += 1;
      })
      .finally(() => {
        reading = undefined;
      });
    return reading;
  };

  // Flushes run one after another, never cancelled: a cancelled batch still writes every result it has.
  const flush = (): void => {
    const items = pending.splice(0);
    if (items.length === 0) return;
    flushing = flushing.then(() =>
      CancellationScope.nonCancellable(async () => {
        const written = await io.flushBatchResults({ sink, expectedBytes: state.sinkBytes, items, deleteIds: state.committedIds });
        state.sinkBytes = written.sinkBytes;
        state.committedIds = items.flatMap((item) => ('line' in item ? [] : [item.id]));
      }),
    );
  };

  const outOfBudget = (): boolean => {
    const info = workflowInfo();
    return info.continueAsNewSuggested || info.historyLength >= historyBudget;
  };

  let fatal: unknown;
  const lane = async (): Promise<void> => {
    while (!scope.consideredCancelled && fatal === undefined) {
      if (outOfBudget()) {
        rollOver = true;
        return;
      }
      if (buffer.length === 0) {
        if (eof) return;
        if (options.pagesPerRun !== undefined && pagesRead >= options.pagesPerRun) {
          rollOver = true;
          return;
        }
        try {
          await refill();
        } catch (error) {
          // A page that cannot be read (the file changed under the batch) ends it; the other lanes drain first.
          if (!isCancellation(error)) {
            fatal ??= error;
            scope.cancel();
          }
          return;
        }
        continue;
      }
      const entry = buffer.shift() as BatchEntry;
      inFlight += 1;
      const startedAt = Date.now();
      try {
        const done = await scope.run(() =>
          agents.runBatchItem.executeWithOptions({ activityId: `item:${entry.id}`, summary: entry.name }, [{ source, sink, entry }]),
        );
        state.succeeded += 1;
        state.tokens.prompt += done.usage?.promptTokens ?? 0;
        state.tokens.completion += done.usage?.completionTokens ?? 0;
        state.tokens.total += done.usage?.totalTokens ?? 0;
        pending.push({ id: done.id });
      } catch (error) {
        if (isCancellation(error)) return; // not written: a resume runs it again
        const outcome = failed({ id: entry.id, prompt: '-' }, error, Date.now() - startedAt, runOptions.retry.maximumAttempts);
        state.failed += 1;
        pending.push({
          line: { id: entry.id, status: 'failed', error: outcome.error, attempts: outcome.attempts, durationMs: outcome.durationMs },
        });
        if (runOptions.errorPolicy === 'fail-fast') {
          state.stoppedBy = 'fail-fast';
          scope.cancel();
        }
      } finally {
        inFlight -= 1;
      }
      if (pending.length >= options.flushEvery) flush();
    }
  };

  // Lanes never throw, so every call has stopped by the time they are all done.
  await Promise.all(Array.from({ length: options.concurrency }, lane));
  phase = CancellationScope.current().consideredCancelled ? 'cancelling' : 'draining';
  flush();
  await flushing;
  state.largestRunHistory = Math.max(state.largestRunHistory, workflowInfo().historyLength);
  if (fatal !== undefined) throw fatal;

  if (CancellationScope.current().consideredCancelled) {
    await CancellationScope.nonCancellable(() => io.finishBatch({ sink }));
    throw new CancelledFailure(`batch ${batchId} cancelled; ${state.succeeded + state.failed} results are in ${sink}`);
  }
  const more = !eof || buffer.length > 0;
  if (rollOver && more && state.stoppedBy === undefined) {
    const cursor = buffer.length > 0 ? buffer[0].offset : nextOffset;
    await continueAsNew<typeof batch>(input, { ...state, cursor, runs: state.runs + 1 });
  }
  await io.finishBatch({ sink });
  phase = 'finished';
  return {
    batchId,
    sink,
    total: state.total,
    succeeded: state.succeeded,
    failed: state.failed,
    alreadyOk: state.alreadyOk,
    notRun: state.total - state.succeeded - state.failed,
    tokens: state.tokens,
    wallMs: Date.now() - state.startedAtMs,
    runs: state.runs,
    largestRunHistory: state.largestRunHistory,
    stoppedBy: state.stoppedBy,
  };
}
