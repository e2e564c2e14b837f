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
import type { BatchChunkResult, BatchItemResult, ScanResult } from '../activities/batch-activities';
import type { FlushItem } from '../batch/result-sink';
import { resolveBatchOptions, type BatchEntry, type BatchInput, type BatchProgress, type BatchResultLine, type BatchState, type BatchSummary } from '../contract/batch';
import { FailureType } from '../contract/failure-types';
import { roundUsd } from '../contract/metrics';
import { childOf } from '../contract/location';
import { recordPacing } from '../contract/pacing';
import { DEFAULT_INLINE_OUTPUT_BYTES } from '../contract/payload-ref';
import { RATE_LIMIT_WAIT_MS, resolveRunOptions } from '../contract/run-options';
import { validateBatchInput } from '../contract/validation';
import { agentActivities } from './agent-activity';
import { validateOrFail } from './input';
import { batchProgressQuery } from './messages';
import { failed } from './task-outcome';

/** Hard ceiling we keep every run under: Temporal warns at 10,240 events. */
const HISTORY_CEILING = 10_240;

/** Calls this long or longer get an activity each; shorter ones share one, as many at once as this allows. */
const CHUNK_TARGET_MS = 2000;
/** Most calls at once in one activity, chosen automatically. */
const AUTO_CHUNK_MAX = 8;
/**
 * Most items one slot of an activity runs one after another, chosen automatically, and about how long of calls in a row
 * that slot runs, so an activity's overhead is paid once per that: before the `batch-deep-chunks` patch, and after it.
 */
const SHALLOW = { maxDepth: 4, depthTargetMs: 1000 };
const DEEP = { maxDepth: 10, depthTargetMs: 2000 };
/** Items in a row per slot while the calls' length is only the scan's hint. */
const HINTED_DEPTH = 2;

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
  const agents = agentActivities(runOptions, { allowEagerDispatch: false });
  const io = storageActivities(options.storageAttempts);
  // Each call still in flight when a run stops starting new ones adds events while it drains.
  const historyBudget = Math.max(2000, HISTORY_CEILING - 8 * options.concurrency - 1000);
  const resume = parsed.resume ?? false;
  // Chunks (several short items per activity) came after batches were first deployed: older histories replay the lanes.
  // Asked once the scan is done, in the same workflow task as the progress memo's patch: Temporal Cloud bills the
  // markers and the search-attribute upsert of a workflow task's patches once for the task.
  let chunking = false;
  // The calls' durations, a moving average; carried across continue-as-new so a new run chunks from its first wave.
  let callMs: number | undefined = carried?.callMs;

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

  let scanned: ScanResult | undefined;
  if (!carried) {
    scanned = await io.scanBatchSource({ source, sink, spool, resume, firstPageSize: options.pageSize });
    state = { ...state, total: scanned.total, alreadyOk: scanned.alreadyOk };
    phase = 'running';
    recordProgress();
  }
  chunking = patched('batch-chunks');
  // Deeper chunks, an even tail, pages read a round of chunks ahead, and the scan's first page and call-length hint.
  const deep = chunking && patched('batch-deep-chunks');
  // A worker that made calls of this model lately knows how long they take: short ones run in chunks from the first wave,
  // but shallow ones (HINTED_DEPTH) until this batch's own calls answer, in case its calls are longer than that worker's.
  // Both hints are absent when a worker of older code ran the scan; the batch then reads its first page and learns.
  const hintMs = deep ? scanned?.typicalCallMs : undefined;
  setCurrentDetails(`batch ${batchId}: ${state.total} items, concurrency ${options.concurrency}`);

  const buffer: BatchEntry[] = [];
  let nextOffset = state.cursor;
  let eof = false;
  let pagesRead = 0;
  let reading: Promise<void> | undefined;
  let rollOver = false;
  let pending: FlushItem[] = [];
  /** Bytes of each pending item's line, and their sum. */
  let pendingSizes: number[] = [];
  let pendingBytes = 0;
  let flushActive = false;
  let flushing: Promise<void> = Promise.resolve();
  let fatal: unknown;
  const scope = new CancellationScope();
  const resumeSpool = state.resumed ? spool : undefined;

  const stopWith = (error: unknown): void => {
    fatal ??= error;
    scope.cancel();
  };

  const mayReadMore = (): boolean => !eof && (options.pagesPerRun === undefined || pagesRead < options.pagesPerRun);
  if (deep && scanned?.firstPage) {
    buffer.push(...scanned.firstPage.entries);
    nextOffset = scanned.firstPage.nextOffset;
    eof = scanned.firstPage.eof;
    pagesRead += 1;
  }

  // Pages are read ahead while the lanes still have work, so no lane waits on a read in the steady state: with deep
  // chunks, until the buffer holds a round of chunks (every slot's next chunk), or each round would wait for a page.
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
    const wanted = options.concurrency * (deep ? chunkShape().depth : 1);
    if (reading === undefined && mayReadMore() && buffer.length < Math.max(wanted, options.pageSize / 2)) {
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
    pendingSizes = [];
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

  /**
   * Flushes for runs with chunks: one at a time, off the items' path; the results that arrive meanwhile wait and go out
   * together in the next flush (up to FLUSH_BYTES each), so a fast batch writes fewer, larger segments instead of
   * queueing a flush per `flushEvery` results behind a slow one.
   */
  const flushNext = (): void => {
    if (flushActive || pending.length === 0 || fatal !== undefined) return;
    let count = 0;
    let bytes = 0;
    while (count < pending.length && (count === 0 || bytes + pendingSizes[count] <= FLUSH_BYTES)) bytes += pendingSizes[count++];
    const items = pending.splice(0, count);
    pendingSizes.splice(0, count);
    pendingBytes -= bytes;
    const sequence = state.segments;
    state.segments += 1;
    flushActive = true;
    flushing = CancellationScope.nonCancellable(() => io.flushBatchResults({ spool, sequence, items }))
      .then(
        (written) => {
          state.sinkBytes += written.bytes;
          recordProgress();
        },
        (error: unknown) => stopWith(error),
      )
      .finally(() => {
        flushActive = false;
        if (pending.length >= options.flushEvery || pendingBytes >= FLUSH_BYTES) flushNext();
      });
  };

  /** Writes everything still pending (a fatal error stops it: that batch fails anyway). */
  const drainFlushes = async (): Promise<void> => {
    if (!chunking) {
      flush();
      await flushing;
      return;
    }
    for (;;) {
      await flushing;
      if (fatal !== undefined || (pending.length === 0 && !flushActive)) return;
      flushNext();
    }
  };

  const outOfBudget = (): boolean => {
    const info = workflowInfo();
    return info.continueAsNewSuggested || info.historyLength >= historyBudget;
  };

  const recordOk = (done: BatchItemResult, earlierAttempts: number): void => {
    state.succeeded += 1;
    state.tokens.prompt += done.usage?.promptTokens ?? 0;
    state.tokens.completion += done.usage?.completionTokens ?? 0;
    state.tokens.total += done.usage?.totalTokens ?? 0;
    cost.usd = roundUsd(cost.usd + (done.costUsd ?? 0));
    if (done.unpriced) cost.unpricedCalls += 1;
    if (done.pacing) recordPacing((state.pacing ??= { keys: [], moves: [] }), done.pacing);
    const line = done.line && earlierAttempts > 0 ? { ...done.line, attempts: done.line.attempts + earlierAttempts } : done.line;
    pending.push(line ? { line } : { lineRef: done.lineRef as string });
    pendingSizes.push(done.bytes);
    pendingBytes += done.bytes;
    callMs = callMs === undefined ? done.durationMs : callMs * 0.9 + done.durationMs * 0.1;
  };

  const recordFailed = (line: BatchResultLine): void => {
    state.failed += 1;
    pending.push({ line });
    pendingSizes.push(200);
    pendingBytes += 200;
    if (runOptions.errorPolicy === 'fail-fast') {
      state.stoppedBy = 'fail-fast';
      scope.cancel();
    }
  };

  const failedLine = (entry: BatchEntry, error: unknown, startedAt: number, earlierAttempts: number): BatchResultLine => {
    const outcome = failed({ id: entry.id, prompt: '-' }, error, Date.now() - startedAt, runOptions.retry.maximumAttempts);
    return { id: entry.id, status: 'failed', error: outcome.error, attempts: outcome.attempts + earlierAttempts, durationMs: outcome.durationMs };
  };

  // A spent budget starts nothing more and cancels what is in flight; those items are not written, so a resume (with a
  // larger budget) runs them.
  const afterResults = (): void => {
    if (state.stoppedBy === undefined && budgetReached()) {
      state.stoppedBy = 'budget';
      scope.cancel();
    }
    if (pending.length >= options.flushEvery || pendingBytes >= FLUSH_BYTES) {
      if (chunking) flushNext();
      else flush();
    }
  };

  /** Runs of this code before chunks (CONTRIBUTING.md): one lane per slot, an activity per item. */
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
        recordOk(done, 0);
      } catch (error) {
        if (isCancellation(error)) return; // not written: a resume runs it again
        if (isFatalItemFailure(error)) {
          stopWith(error);
          return;
        }
        recordFailed(failedLine(entry, error, startedAt, 0));
      } finally {
        inFlight -= 1;
      }
      afterResults();
    }
  };

  // Items of a chunk that failed retryably run again, one activity each, with the attempts the chunk left them.
  const retries: BatchEntry[] = [];
  const retryAgents = agentActivities(
    { ...runOptions, retry: { ...runOptions.retry, maximumAttempts: Math.max(1, runOptions.retry.maximumAttempts - 1) } },
    { allowEagerDispatch: false },
  );
  const running = new Set<Promise<void>>();

  // Before `batch-deep-chunks`, every item of a chunk had to fit the one activity's start-to-close (agentTimeoutMs + the
  // rate-limit wait budget); after it, a chunk's timeout is that times its depth, and each item still gets one call's.
  const depthCap = Math.max(1, Math.floor((runOptions.agentTimeoutMs + RATE_LIMIT_WAIT_MS) / runOptions.agentTimeoutMs));

  /**
   * How the next activity runs its items: `parallel` calls at once, each slot taking `depth` items one after another. Set
   * by the batch (`itemsPerActivity`, all at once), else from the calls' durations so far: an activity per item at first
   * and for calls of CHUNK_TARGET_MS or more; for shorter calls up to AUTO_CHUNK_MAX at once (never over a quarter of
   * the concurrency, so several activities share it), each slot running about `depthTargetMs` of calls in a row.
   */
  const chunkShape = (): { parallel: number; depth: number } => {
    if (options.itemsPerActivity !== undefined) return { parallel: options.itemsPerActivity, depth: 1 };
    const known = callMs ?? hintMs;
    if (known === undefined) return { parallel: 1, depth: 1 };
    const ms = Math.max(1, known);
    const { maxDepth, depthTargetMs } = deep ? DEEP : SHALLOW;
    const parallel = Math.max(1, Math.min(AUTO_CHUNK_MAX, Math.floor(options.concurrency / 4), Math.floor(CHUNK_TARGET_MS / ms)));
    const most = !deep ? depthCap : callMs === undefined ? HINTED_DEPTH : maxDepth;
    return { parallel, depth: parallel === 1 ? 1 : Math.max(1, Math.min(maxDepth, most, Math.floor(depthTargetMs / ms))) };
  };

  const runEntries = async (entries: BatchEntry[], parallel: number, retry: boolean): Promise<void> => {
    const startedAt = Date.now();
    const earlier = retry ? 1 : 0;
    const inlineLineBytes = DEFAULT_INLINE_OUTPUT_BYTES;
    if (entries.length === 1) {
      const [entry] = entries;
      try {
        recordOk(
          await scope.run(() =>
            (retry ? retryAgents : agents).runBatchItem.executeWithOptions({ activityId: `item:${entry.id}`, summary: entry.name }, [{ source, spool, entry, inlineLineBytes }]),
          ),
          earlier,
        );
      } catch (error) {
        if (isCancellation(error)) return; // not written: a resume runs it again
        if (isFatalItemFailure(error)) return stopWith(error);
        recordFailed(failedLine(entry, error, startedAt, earlier));
      }
      return afterResults();
    }
    let chunk: BatchChunkResult;
    try {
      const attemptMs = runOptions.agentTimeoutMs + RATE_LIMIT_WAIT_MS;
      const timing = deep ? { startToCloseTimeout: Math.ceil(entries.length / parallel) * attemptMs } : {};
      chunk = await scope.run(() =>
        agents.runBatchChunk.executeWithOptions({ activityId: `chunk:${entries[0].id}`, summary: `${entries.length} items from ${entries[0].name}`, ...timing }, [
          { source, spool, entries, inlineLineBytes, parallel, ...(deep ? { itemAttemptMs: attemptMs } : {}) },
        ]),
      );
    } catch (error) {
      if (isCancellation(error)) return;
      if (isFatalItemFailure(error)) return stopWith(error);
      for (const entry of entries) recordFailed(failedLine(entry, error, startedAt, 0));
      return afterResults();
    }
    chunk.items.forEach((item, index) => {
      if (item.ok) recordOk(item.ok, 0);
      else if (item.failed.retryable && runOptions.retry.maximumAttempts > 1) retries.push(entries[index]);
      else recordFailed({ id: item.failed.id, status: 'failed', error: { type: item.failed.type, message: item.failed.message }, attempts: 1, durationMs: item.failed.durationMs });
    });
    afterResults();
  };

  /** Items in the activities running now, and what is left of the current round of chunks (deep chunks only). */
  let itemsOut = 0;
  const round = { slots: 0, depth: 1 };
  const start = (entries: BatchEntry[], parallel: number, retry: boolean): void => {
    inFlight += parallel;
    itemsOut += entries.length;
    const run: Promise<void> = runEntries(entries, parallel, retry).finally(() => {
      inFlight -= parallel;
      itemsOut -= entries.length;
      running.delete(run);
    });
    running.add(run);
  };

  /**
   * Starts activities while fewer than `concurrency` calls are in flight, each shaped by `chunkShape()` (never more
   * calls at once than the free room), retries first. Never throws.
   */
  const dispatch = async (): Promise<void> => {
    while (!scope.consideredCancelled && fatal === undefined) {
      const room = options.concurrency - inFlight;
      if (room > 0 && retries.length > 0) {
        start([retries.shift() as BatchEntry], 1, true);
        continue;
      }
      rollOver ||= outOfBudget();
      const more = !rollOver && (buffer.length > 0 || reading !== undefined || mayReadMore());
      if (!more || room <= 0) {
        if (running.size === 0) break;
        await Promise.race(running);
        continue;
      }
      readAhead();
      const shape = chunkShape();
      // What is not started yet is split into equal rounds, a round giving every slot one chunk of the same depth, so the
      // last round's chunks end together instead of a few slots running full-depth chunks while the others have nothing.
      if (deep && round.slots <= 0) {
        const unstarted = state.total - state.succeeded - state.failed - itemsOut;
        const rounds = Math.max(1, Math.ceil(unstarted / (options.concurrency * shape.depth)));
        round.depth = Math.max(1, Math.ceil(unstarted / (options.concurrency * rounds)));
        round.slots = options.concurrency;
      }
      const depth = deep ? Math.min(shape.depth, round.depth) : shape.depth;
      // With deep chunks, a chunk is not started short while the page that fills it is on its way.
      const short = deep && buffer.length < Math.min(shape.parallel, room) * depth && (reading !== undefined || mayReadMore());
      if (buffer.length === 0 || short) {
        try {
          await (reading ?? refill());
        } catch (error) {
          // A page that cannot be read (storage down, the file changed) ends the batch; what is in flight drains first.
          if (!isCancellation(error)) stopWith(error);
          break;
        }
        continue;
      }
      const parallel = Math.min(shape.parallel, room, buffer.length);
      start(buffer.splice(0, Math.min(parallel * depth, buffer.length)), parallel, false);
      round.slots -= parallel;
    }
    await Promise.all(running);
    if (!scope.consideredCancelled && fatal === undefined && !eof) rollOver = true; // the history budget, or pagesPerRun
  };

  // Neither throws, so every call has stopped by the time they are done.
  if (chunking) await dispatch();
  else await Promise.all(Array.from({ length: options.concurrency }, lane));
  await (reading ?? Promise.resolve()).catch(() => undefined);
  phase = CancellationScope.current().consideredCancelled ? 'cancelling' : 'draining';
  await drainFlushes();
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
    await continueAsNew<typeof batch>(input, { ...state, cursor, runs: state.runs + 1, ...(callMs === undefined ? {} : { callMs }) });
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
