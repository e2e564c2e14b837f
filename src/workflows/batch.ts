import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  continueAsNew,
  isCancellation,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { FlushItem } from '../batch/result-sink';
import { resolveBatchOptions, type BatchEntry, type BatchInput, type BatchProgress, type BatchState, type BatchSummary } from '../contract/batch';
import { FailureType } from '../contract/failure-types';
import { roundUsd } from '../contract/metrics';
import { childOf } from '../contract/location';
import { recordPacing } from '../contract/pacing';
import { DEFAULT_INLINE_OUTPUT_BYTES } from '../contract/payload-ref';
import { resolveRunOptions } from '../contract/run-options';
import { validateBatchInput } from '../contract/validation';
import { agentActivities } from './agent-activity';
import { validateOrFail } from './input';
import { batchProgressQuery } from './messages';
import { failed } from './task-outcome';

/** Hard ceiling we keep every run under: Temporal warns at 10,240 events. */
const HISTORY_CEILING = 10_240;

/** A flush's input stays far below Temporal's 2 MB payload limit. */
const FLUSH_BYTES = 512 * 1024;

/**
 * Source and sink I/O heartbeats every 3 s once it has run that long, so a lost worker's page read or flush is retried within seconds. Retries
 * are bounded (`storageAttempts`, by default about a minute and a half of trying): a store that keeps failing ends the
 * batch FAILED with its error, never a batch that retries forever.
 */
function storageActivities(attempts: number) {
  return proxyActivities<Activities>({
    startToCloseTimeout: '30 minutes',
    heartbeatTimeout: '10 seconds',
    retry: {
      initialInterval: '1 second',
      maximumInterval: '15 seconds',
      maximumAttempts: attempts,
      nonRetryableErrorTypes: [FailureType.InvalidInput, FailureType.SinkChanged, FailureType.SourceChanged],
    },
  });
}

/** Failures of an item that mean the batch itself is broken, not the item: they end the batch. */
function isFatalItemFailure(error: unknown): boolean {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  return cause instanceof ApplicationFailure && (cause.type === FailureType.SourceChanged || cause.type === FailureType.SinkChanged);
}

/**
 * A long-running batch: items are read from a JSONL file (local or S3) in pages by an activity, run with at most
 * `concurrency` calls in flight (a new one starts as each finishes), and their result lines are written by flush
 * activities as numbered segments of a spool, then concatenated into the sink when the batch ends; the workflow holds
 * only offsets, counters and the lines waiting for the next flush. Each run continues-as-new before its history grows
 * large; a cancelled or failed batch still writes every finished result, and a resume runs only what is not ok yet.
 */
export async function batch(input: BatchInput, carried?: BatchState): Promise<BatchSummary> {
  const parsed = validateOrFail(validateBatchInput, input);
  const { source, sink, batchId } = parsed;
  const runOptions = resolveRunOptions({ ...parsed.options, maxParallel: undefined });
  const options = resolveBatchOptions(parsed.options);
  const agents = agentActivities(runOptions);
  const io = storageActivities(options.storageAttempts);
  // Each call still in flight when a run stops starting new ones adds events while it drains.
  const historyBudget = Math.max(2000, HISTORY_CEILING - 8 * options.concurrency - 1000);
  const resume = parsed.resume ?? false;

  let phase: BatchProgress['state'] = carried ? 'running' : 'scanning';
  let inFlight = 0;
  let state: BatchState = carried ?? {
    cursor: 0,
    total: 0,
    alreadyOk: 0,
    succeeded: 0,
    failed: 0,
    tokens: { prompt: 0, completion: 0, total: 0 },
    cost: { usd: 0, unpricedCalls: 0 },
    // The first run id of this chain names the spool, so a resume never mixes its segments with an older run's.
    spool: childOf(`${sink}.parts`, workflowInfo().firstExecutionRunId),
    segments: resume ? 1 : 0,
    sinkBytes: 0,
    resumed: resume,
    startedAtMs: Date.now(),
    runs: 1,
    largestRunHistory: 0,
  };
  const { spool } = state;
  state.cost ??= { usd: 0, unpricedCalls: 0 };
  const cost = state.cost;
  const budgetReached = (): boolean =>
    (runOptions.tokenBudget !== undefined && state.tokens.total >= runOptions.tokenBudget) ||
    (runOptions.costBudgetUsd !== undefined && cost.usd >= runOptions.costBudgetUsd);

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
      cost,
      runs: state.runs,
      historyLength: workflowInfo().historyLength,
      elapsedMs,
      ...(state.pacing ? { pacing: state.pacing } : {}),
    };
  });

  // Progress in the memo, so the UI and `temporal workflow describe` show how far a batch got with no worker up to answer
  // the progress query. Gated (CONTRIBUTING.md): runs started before this change have no such commands in their history.
  const recordProgress = (): void => {
    if (patched('batch-progress-memo')) {
      upsertMemo({ progress: { total: state.total, done: state.succeeded + state.failed, failed: state.failed, runs: state.runs } });
    }
  };

  if (!carried) {
    const scan = await io.scanBatchSource({ source, sink, spool, resume });
    state = { ...state, total: scan.total, alreadyOk: scan.alreadyOk };
    phase = 'running';
    recordProgress();
  }
  setCurrentDetails(`batch ${batchId}: ${state.total} items, concurrency ${options.concurrency}`);

  const buffer: BatchEntry[] = [];
  let nextOffset = state.cursor;
  let eof = false;
  let pagesRead = 0;
  let reading: Promise<void> | undefined;
  let rollOver = false;
  let pending: FlushItem[] = [];
  let pendingBytes = 0;
  let flushing: Promise<void> = Promise.resolve();
  let fatal: unknown;
  const scope = new CancellationScope();
  const resumeSpool = state.resumed ? spool : undefined;

  const stopWith = (error: unknown): void => {
    fatal ??= error;
    scope.cancel();
  };

  const mayReadMore = (): boolean => !eof && (options.pagesPerRun === undefined || pagesRead < options.pagesPerRun);

  // Pages are read ahead while the lanes still have work, so no lane waits on a read in the steady state.
  const refill = (): Promise<void> => {
    reading ??= io
      .readBatchPage({ source, offset: nextOffset, limit: options.pageSize, ...(resumeSpool ? { resumeSpool } : {}) })
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
  const readAhead = (): void => {
    if (reading === undefined && mayReadMore() && buffer.length < Math.max(options.concurrency, options.pageSize / 2)) {
      refill().catch((error: unknown) => {
        if (!isCancellation(error)) stopWith(error);
      });
    }
  };

  // Flushes run one after another, never cancelled: a cancelled batch still writes every result it has.
  const flush = (): void => {
    if (pending.length === 0 || fatal !== undefined) return;
    const items = pending;
    const sequence = state.segments;
    pending = [];
    pendingBytes = 0;
    state.segments += 1;
    flushing = flushing.then(() =>
      fatal !== undefined
        ? undefined
        : CancellationScope.nonCancellable(() => io.flushBatchResults({ spool, sequence, items })).then(
            (written) => {
              state.sinkBytes += written.bytes;
              recordProgress();
            },
            (error: unknown) => stopWith(error),
          ),
    );
  };

  const outOfBudget = (): boolean => {
    const info = workflowInfo();
    return info.continueAsNewSuggested || info.historyLength >= historyBudget;
  };

  const lane = async (): Promise<void> => {
    while (!scope.consideredCancelled && fatal === undefined) {
      if (outOfBudget()) {
        rollOver = true;
        return;
      }
      readAhead();
      if (buffer.length === 0) {
        if (reading === undefined && !mayReadMore()) {
          if (!eof) rollOver = true; // pagesPerRun reached
          return;
        }
        try {
          await (reading ?? refill());
        } catch (error) {
          // A page that cannot be read (storage down, the file changed) ends the batch; the other lanes drain first.
          if (!isCancellation(error)) stopWith(error);
          return;
        }
        continue;
      }
      const entry = buffer.shift() as BatchEntry;
      inFlight += 1;
      const startedAt = Date.now();
      try {
        const done = await scope.run(() =>
          agents.runBatchItem.executeWithOptions({ activityId: `item:${entry.id}`, summary: entry.name }, [
            { source, spool, entry, inlineLineBytes: DEFAULT_INLINE_OUTPUT_BYTES },
          ]),
        );
        state.succeeded += 1;
        state.tokens.prompt += done.usage?.promptTokens ?? 0;
        state.tokens.completion += done.usage?.completionTokens ?? 0;
        state.tokens.total += done.usage?.totalTokens ?? 0;
        cost.usd = roundUsd(cost.usd + (done.costUsd ?? 0));
        if (done.unpriced) cost.unpricedCalls += 1;
        if (done.pacing) recordPacing((state.pacing ??= { keys: [], moves: [] }), done.pacing);
        pending.push(done.line ? { line: done.line } : { lineRef: done.lineRef as string });
        pendingBytes += done.bytes;
      } catch (error) {
        if (isCancellation(error)) return; // not written: a resume runs it again
        if (isFatalItemFailure(error)) {
          stopWith(error);
          return;
        }
        const outcome = failed({ id: entry.id, prompt: '-' }, error, Date.now() - startedAt, runOptions.retry.maximumAttempts);
        state.failed += 1;
        pending.push({
          line: { id: entry.id, status: 'failed', error: outcome.error, attempts: outcome.attempts, durationMs: outcome.durationMs },
        });
        pendingBytes += 200;
        if (runOptions.errorPolicy === 'fail-fast') {
          state.stoppedBy = 'fail-fast';
          scope.cancel();
        }
      } finally {
        inFlight -= 1;
      }
      // A spent budget starts nothing more and cancels what is in flight; those items are not written, so a resume
      // (with a larger budget) runs them.
      if (state.stoppedBy === undefined && budgetReached()) {
        state.stoppedBy = 'budget';
        scope.cancel();
      }
      if (pending.length >= options.flushEvery || pendingBytes >= FLUSH_BYTES) flush();
    }
  };

  // Lanes never throw, so every call has stopped by the time they are all done.
  await Promise.all(Array.from({ length: options.concurrency }, lane));
  await (reading ?? Promise.resolve()).catch(() => undefined);
  phase = CancellationScope.current().consideredCancelled ? 'cancelling' : 'draining';
  flush();
  await flushing;
  state.largestRunHistory = Math.max(state.largestRunHistory, workflowInfo().historyLength);
  const finish = () => CancellationScope.nonCancellable(() => io.finishBatch({ sink, spool, segments: state.segments }));

  if (fatal !== undefined) {
    // Whatever was flushed still reaches the sink and the spool is removed, if the store allows; the batch then fails.
    await finish().catch(() => undefined);
    throw fatal;
  }
  if (CancellationScope.current().consideredCancelled) {
    await finish();
    throw new CancelledFailure(`batch ${batchId} cancelled; ${state.succeeded + state.failed} results are in ${sink}`);
  }
  const more = !eof || buffer.length > 0;
  if (rollOver && more && state.stoppedBy === undefined) {
    const cursor = buffer.length > 0 ? buffer[0].offset : nextOffset;
    await continueAsNew<typeof batch>(input, { ...state, cursor, runs: state.runs + 1 });
  }
  const { sinkBytes } = await finish();
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
    cost,
    wallMs: Date.now() - state.startedAtMs,
    runs: state.runs,
    largestRunHistory: state.largestRunHistory,
    sinkBytes,
    stoppedBy: state.stoppedBy,
    ...(state.pacing ? { pacing: state.pacing } : {}),
  };
}
