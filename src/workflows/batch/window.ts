import {
  CancellationScope,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  setHandler,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import type { LaneResult, LaneRetry } from '../../contract/batch-activities';
import {
  emptyCounters,
  pageLimit,
  resolveBatchOptions,
  type BatchEntry,
  type BatchStopReason,
} from '../../contract/batch';
import { recordPacing, type PacingStatus } from '../../contract/pacing';
import { RATE_LIMIT_WAIT_MS, resolveRunOptions } from '../../contract/run-option-defaults';
import { laneName } from '../../contract/lane-name';
import { laneDepth, laneParallelism, PREVIOUS_SHARE } from './lane-shape';
import { handOverSignal, windowProgressQuery, type HandOver, type WindowProgress } from './messages';
import { PageReader } from './page-reader';
import { laneActivities, storageActivities } from './activity-options';
import { addLaneCounts } from './counters';
import { failureOf, FATAL_TYPES } from './failures';
import { AgentItems } from './agent-item';
import type { WindowInput, WindowResult } from './window-contract';
import { WindowSlots } from './window-slots';
import { WindowLedger } from './slot-ledger';

export type { WindowInput, WindowResult, WindowStart } from './window-contract';

/** Most lanes one window keeps in flight: well inside Temporal's 2,000 pending activities per workflow. */
export const MAX_LANES_PER_WINDOW = 1000;
/** Most read-ahead entries a window hands its successor (about 60 bytes each in the signal and the child's input). */
const HAND_OFF_ENTRIES = 4000;
/** Hard ceiling a window stays under (Temporal warns at 10,240 events), and the history bytes it hands over before. */
const [HISTORY_CEILING, HISTORY_BYTES] = [10_240, 4 * 1024 * 1024];

/**
 * One window of a batch: a sliding window of lanes (and agents) over the task file from `cursor`, `concurrency` calls in
 * flight less what its predecessor still holds, one started as soon as one ends. Lanes journal answers in the spool; the
 * window holds offsets and counters. Near its history budget it hands the rest to a successor (started at once) and lets
 * its lanes run out, returning their slots one by one: the batch's window never drains. Cancelled (cancel, fail-fast,
 * budget), it cancels its lanes, which write what they have and return, and reports.
 */
export async function batchWindow(input: WindowInput): Promise<WindowResult> {
  const runOptions = resolveRunOptions({ ...input.options, maxParallel: undefined });
  const options = resolveBatchOptions(input.options);
  const parallel = laneParallelism(options.concurrency, MAX_LANES_PER_WINDOW);
  const lanesWide = Math.ceil(options.concurrency / parallel);
  const itemAttemptMs = runOptions.agentTimeoutMs + RATE_LIMIT_WAIT_MS;
  const lanes = laneActivities(runOptions, parallel, itemAttemptMs);
  const io = storageActivities(options.storageAttempts);
  const share = input.laneShare ?? PREVIOUS_SHARE;

  const counters = emptyCounters();
  const retries: LaneRetry[] = [...input.retries];
  const unsealed: string[] = [];
  let unstarted = input.unstarted;
  let callMs = input.callMs;
  let pacing: PacingStatus | undefined;
  let sequence = 0;
  let stoppedBy: BatchStopReason | undefined;
  let fatal: { type: string; message: string } | undefined;
  /** running: starts lanes; draining: handed over, lets its lanes end (running retries in their slots); stopping: cancelled. */
  let mode = 'running' as 'running' | 'draining' | 'stopping';
  let changed = 0;
  const wake = () => (changed += 1);
  const running = new Set<Promise<void>>();
  const agents = new AgentItems(input, runOptions, io, counters);
  const scope = new CancellationScope();
  const reader = new PageReader(
    io,
    {
      file: input.file,
      fileBytes: input.fileBytes,
      cursor: input.cursor,
      pageSize: pageLimit(options),
      maxPages: options.pagesPerRun,
      end: input.end,
    },
    input.firstPage,
    wake,
    input.window > 0,
  );

  // Every count of the window's slots is in its ledger (slot-ledger.ts, with the invariant); the signals in `slots`.
  const ledger = new WindowLedger(input, {
    concurrency: options.concurrency,
    windowCalls: options.windowCalls,
    parallel,
    maxLanes: MAX_LANES_PER_WINDOW,
  });
  const slots = new WindowSlots(ledger, wake);
  setHandler(windowProgressQuery, (): WindowProgress => ({
    window: input.window,
    counters,
    inFlight: ledger.inFlight,
    lanes: sequence,
    historyLength: workflowInfo().historyLength,
    mode,
    borrowed: ledger.borrowed,
    ...(pacing ? { pacing } : {}),
    ...(agents.running.size > 0 ? { agents: [...agents.running] } : {}),
  }));

  const spentTokens = () => input.spent.tokens + counters.tokens.total;
  const spentUsd = () => input.spent.usd + counters.cost.usd;
  const stop = (): void => {
    mode = 'stopping';
    scope.cancel();
    wake();
  };
  const add = (result: LaneResult): void => {
    addLaneCounts(counters, result);
    if (result.calls > 0) {
      const laneMs = result.callMsTotal / result.calls;
      callMs = callMs === undefined ? laneMs : callMs * 0.8 + laneMs * 0.2;
    }
    if (result.pacing) recordPacing((pacing ??= { keys: [], moves: [] }), result.pacing);
    // A stopped window runs nothing more: retries are left for a resume, like the items never started.
    if (mode !== 'stopping') retries.push(...result.retry);
    if (result.failed > 0 && runOptions.errorPolicy === 'fail-fast') {
      stoppedBy ??= 'fail-fast';
      stop();
    }
    if (
      (runOptions.tokenBudget !== undefined && spentTokens() >= runOptions.tokenBudget) ||
      (runOptions.costBudgetUsd !== undefined && spentUsd() >= runOptions.costBudgetUsd)
    ) {
      stoppedBy ??= 'budget';
      stop();
    }
  };
  const fail = (failure: { type: string; message: string }, lane?: string): void => {
    fatal ??= { type: failure.type, message: failure.message };
    if (lane !== undefined) unsealed.push(lane);
    stop();
  };

  /** A lane that ended without a result: sealed with its failure as the line of every unanswered item, or fatal. */
  const settleFailed = async (lane: string, entries: BatchEntry[], error: unknown): Promise<void> => {
    const failure = failureOf(error);
    if (FATAL_TYPES.includes(failure.type)) return fail(failure, lane);
    const seal = { spool: input.spool, lane, entries, failure, attempts: runOptions.retry.maximumAttempts };
    try {
      add(await CancellationScope.nonCancellable(() => io.sealBatchLane(seal)));
    } catch (sealError) {
      fail(failureOf(sealError), lane);
    }
  };

  /** Runs a lane (or an agent item) in the window's scope, counting `calls` in flight until it has ended. */
  const track = (lane: string, entries: BatchEntry[], calls: number, work: () => Promise<LaneResult>): void => {
    ledger.started(calls);
    const run: Promise<void> = scope
      .run(work)
      .then(add, async (error: unknown) => {
        // Cancelled before it ran: none of its items was answered, and a resume runs them.
        if (isCancellation(error)) unsealed.push(lane);
        else await settleFailed(lane, entries, error);
      })
      .finally(() => {
        ledger.ended(calls);
        running.delete(run);
        wake();
      });
    running.add(run);
  };

  const startLane = (entries: BatchEntry[], priorAttempts: number): void => {
    const lane = laneName(input.window, sequence++);
    const maximumAttempts = Math.max(1, runOptions.retry.maximumAttempts - priorAttempts);
    const summary = entries.length === 1 ? entries[0].id : `${entries.length} items from ${entries[0].id}`;
    track(lane, entries, Math.min(parallel, entries.length), () =>
      lanes(maximumAttempts, entries.length).runBatchLane.executeWithOptions({ activityId: `lane:${lane}`, summary }, [
        {
          file: input.file,
          fileBytes: input.fileBytes,
          spool: input.spool,
          lane,
          entries,
          parallel,
          itemAttemptMs,
          priorAttempts,
          maximumAttempts: runOptions.retry.maximumAttempts,
          batchId: input.batchId,
          ...(runOptions.errorPolicy === 'fail-fast' ? { stopAtFailure: true } : {}),
          ...(input.call ? { call: input.call } : {}),
        },
      ]),
    );
  };

  /** An agent item: a child workflow in a slot of the window, sealed as a lane of one item (agent-item.ts). */
  const startAgent = (entry: BatchEntry, slots: number): void => {
    const lane = laneName(input.window, sequence++);
    const spent = { tokens: spentTokens(), usd: spentUsd() };
    track(lane, [entry], 1, () => agents.run(entry, lane, spent, slots));
  };

  // Each lane still out at a hand-over adds about four events as it ends. Temporal's continue-as-new suggestion (4,096
  // events) is not used: a hand-over is cheap but not free; a window stays well inside the 10,240 it warns at.
  const historyBudget = () => Math.max(2000, HISTORY_CEILING - 4 * ledger.wide(lanesWide) - 200);
  const outOfHistory = (): boolean => {
    const info = workflowInfo();
    return sequence > 0 && (info.historyLength >= historyBudget() || info.historySize >= HISTORY_BYTES);
  };

  const handOver = async (): Promise<void> => {
    mode = 'draining';
    ledger.handingOver();
    await reader.settle();
    const next: HandOver = {
      window: input.window,
      cursor: reader.cursor(),
      end: input.end,
      firstPage: reader.handOff(HAND_OFF_ENTRIES),
      retries: retries.splice(0),
      ...ledger.handOver(),
      unstarted,
      ...(callMs === undefined ? {} : { callMs }),
      // What this window's agents still hold counts as spent there (their spend after the hand-over is this window's).
      spent: { tokens: spentTokens() + agents.held().tokens, usd: spentUsd() + agents.held().usd },
    };
    await getExternalWorkflowHandle(input.batchWorkflowId).signal(handOverSignal, next);
  };

  const shape = () => ({
    unstarted,
    concurrency: ledger.wide(lanesWide),
    callMs,
    maxDepth: options.itemsPerActivity,
    share,
  });

  /** Starts what there is room for; true when the window has nothing left to start. */
  const dispatch = (): boolean => {
    if (reader.failed !== undefined && !isCancellation(reader.failed)) {
      fail(failureOf(reader.failed));
      return true;
    }
    for (;;) {
      const room = ledger.room();
      if (room > 0 && retries.length > 0) {
        const retry = retries.shift() as LaneRetry;
        startLane([retry.entry], retry.attempts);
        continue;
      }
      // A wave of lanes' worth of entries buffered ahead: lanes ending together must not wait on a page read.
      reader.readAhead(ledger.wide(lanesWide) * parallel * laneDepth(shape()) * 2);
      if (room > 0 && reader.buffered() > 0) {
        // An agent entry waits while MAX_AGENTS_PER_WINDOW run (Temporal refuses a 2,001st pending child).
        const entries = reader.takeNext(Math.min(laneDepth(shape()) * parallel, reader.buffered()), agents.hasRoom());
        unstarted -= entries.length;
        if (entries[0]?.agent) startAgent(entries[0], Math.min(room, unstarted + 1));
        else if (entries.length > 0) startLane(entries, 0);
        if (entries.length > 0) continue;
      }
      return !reader.hasMore() && retries.length === 0;
    }
  };

  for (;;) {
    // Taken before this round awaits: a change during an await (a lane ending mid-signal) wakes the next wait.
    const seen = changed;
    if (mode === 'running') {
      const exhausted = dispatch();
      if (mode === 'running' && ((exhausted && reader.leftForSuccessor()) || (!exhausted && outOfHistory()))) {
        await CancellationScope.nonCancellable(handOver);
      }
    }
    if (mode === 'draining') {
      // Retries of lanes that ended after the hand-over run here, in the slots those lanes held.
      while (retries.length > 0 && ledger.takeFreed()) {
        const retry = retries.shift() as LaneRetry;
        startLane([retry.entry], retry.attempts);
      }
      await slots.passOn();
    }
    const nothingToStart = mode !== 'running' || (!reader.hasMore() && retries.length === 0);
    const settled = mode !== 'draining' || (retries.length === 0 && ledger.settled());
    if (running.size === 0 && nothingToStart && settled) break;
    try {
      if (mode === 'stopping') await CancellationScope.nonCancellable(() => condition(() => changed !== seen));
      else await condition(() => changed !== seen);
    } catch (error) {
      if (!isCancellation(error)) throw error;
      // The batch cancelled this window: its lanes, in a scope inside the window's, are cancelled with it.
      stop();
    }
  }
  // What the window came to, in its memo: the UI shows it with no worker up to answer a query. A batch's sole window
  // that ran to its end leaves it to the batch's memo, written as soon as the sink is (an action less a small batch).
  if (!input.sole || mode === 'stopping' || ledger.handedOver)
    upsertMemo({
      progress: {
        window: input.window,
        done: counters.succeeded + counters.failed,
        failed: counters.failed,
        lanes: sequence,
      },
    });
  return {
    lanes: sequence,
    unsealed,
    counters,
    ...(stoppedBy === undefined ? {} : { stoppedBy }),
    ...(fatal === undefined ? {} : { fatal }),
    handedOver: ledger.handedOver,
    ...(ledger.unpassed() > 0 ? { lent: ledger.unpassed() } : {}),
    historyLength: workflowInfo().historyLength,
    ...(callMs === undefined ? {} : { callMs }),
    ...(pacing ? { pacing } : {}),
  };
}
