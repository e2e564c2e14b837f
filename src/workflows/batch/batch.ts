import {
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  ChildWorkflowCancellationType,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  ParentClosePolicy,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertMemo,
  workflowInfo,
  type ChildWorkflowHandle,
} from '@temporalio/workflow';
import {
  emptyCounters,
  pageLimit,
  BATCH_PROMPT_CACHE,
  providerBatchWorkflowId,
  resolveBatchOptions,
  type BatchEntry,
  type BatchInput,
  type BatchProgress,
  type BatchStopReason,
  type BatchSummary,
  stripeConcurrency,
  stripesWanted,
  windowWorkflowId,
} from '../../contract/batch';
import { childOf } from '../../contract/location';
import { FailureType } from '../../contract/failure-types';
import type { PacingStatus } from '../../contract/pacing';
import { validateBatchInput } from '../../contract/validation';
import { validateOrFail } from '../input';
import { batchProgressQuery } from '../messages';
import { handOverSignal, slotsFreedSignal, slotsLentSignal, successorSignal, type HandOver } from './messages';
import { batchWindow, type WindowInput, type WindowResult, type WindowStart } from './window';
import { sendProviderBatches } from './provider-route';
import { hasBudget, PROVIDER_BATCH_BUDGET_REFUSAL, resolveAutoRoute } from '../../contract/route-options';
import { storageActivities } from './activity-options';
import { laneShareFor } from './lane-shape';
import { stripeStarts } from './stripe-plan';
import { StripeLending } from './slot-ledger';
import { addCounters } from './counters';
import { messageChain } from './failures';
import { DAY_MS, syncCallOptions } from './sync-call';
import { patched030 } from '../patches';

/** The provider-batch route failed (`fatal` says how): nothing more is sent, and the sink is written from the spool. */
class RouteFailed extends Error {}

/**
 * A batch: a JSONL task file (local or S3) run with at most `concurrency` calls in flight, every result written once to
 * a JSONL sink. The batch scans the file, then runs it through windows (child workflows, `batchWindow`): a window keeps
 * the calls in flight, and near its history budget hands over to a successor that starts at once while its own calls
 * run on, so the batch never drains and its histories stay small whatever its size. Results are journaled by the lanes
 * as they answer and assembled into the sink at the end, whatever the end (finished, cancelled, failed fast, out of
 * budget, failed); a resume runs only what is not ok yet.
 */
export async function batch(input: BatchInput): Promise<BatchSummary> {
  const parsed = validateOrFail(validateBatchInput, input);
  const { source, sink, batchId } = parsed;
  const options = resolveBatchOptions(parsed.options);
  const info = workflowInfo();
  const resumed = parsed.resume ?? false;
  const io = storageActivities(options.storageAttempts);
  // The first run id names the spool, so a resume (a new run of the same id) never mixes its results with an older run's.
  const spool = childOf(`${sink}.parts`, info.firstExecutionRunId);
  const startedAtMs = Date.now();

  let phase: BatchProgress['state'] = 'scanning';
  let total = 0;
  let alreadyOk = 0;
  const counters = emptyCounters();
  const lanesPerWindow: number[] = [];
  const unsealed: string[] = [];
  const running = new Map<number, { workflowId: string; scope: CancellationScope }>();
  /** Each window's start, resolved with its handle once it runs (undefined if it never did). */
  const started = new Map<number, Promise<ChildWorkflowHandle<typeof batchWindow> | undefined>>();
  let largestRunHistory = 0;
  const handOvers: HandOver[] = [];
  /** Windows whose result has come (each holds no call from then on). */
  const ended = new Set<number>();
  let stoppedBy: BatchStopReason | undefined;
  let fatal: { type: string; message: string } | undefined;
  let pacing: PacingStatus | undefined;
  let changed = 0;
  // The route's state, for the progress query: the provider-batch child while it runs, its batches once it has ended.
  const routeState: Pick<BatchProgress, 'route' | 'providerBatchWorkflow' | 'providerBatches' | 'savingsUsd'> = {};

  setHandler(handOverSignal, (handOver) => {
    handOvers.push(handOver);
    changed += 1;
  });
  setHandler(batchProgressQuery, (): BatchProgress => {
    const done = counters.succeeded + counters.failed;
    const elapsedMs = Math.max(1, Date.now() - startedAtMs);
    return {
      batchId,
      state: phase,
      total,
      done,
      succeeded: counters.succeeded,
      failed: counters.failed,
      inFlight: 0,
      pending: Math.max(0, total - done),
      alreadyOk,
      callsPerSecond: (done * 1000) / elapsedMs,
      etaSeconds: null,
      tokens: counters.tokens,
      cost: counters.cost,
      runs: lanesPerWindow.length,
      historyLength: workflowInfo().historyLength,
      elapsedMs,
      runningWindows: [...running.values()].map((window) => window.workflowId),
      ...(pacing ? { pacing } : {}),
      ...routeState,
    };
  });

  // A batch wider than one window's calls runs its file in stripes, a chain of windows each, side by side.
  const wanted = stripesWanted(parsed.options);
  const scan = await io.scanBatchSource({
    source,
    sink,
    spool,
    resume: resumed,
    firstPageSize: pageLimit(options),
    ...(wanted > 1 ? { stripes: wanted } : {}),
  });
  total = scan.total;
  alreadyOk = scan.alreadyOk;
  phase = 'running';
  setCurrentDetails(`batch ${batchId}: ${total} items, concurrency ${options.concurrency}`);

  /** The file the windows run: the scanned one, or the provider route's hand-back. */
  let runs = { file: scan.file, fileBytes: scan.fileBytes };
  const windowId = (window: number) => windowWorkflowId(batchId, info.firstExecutionRunId, window);
  // Stripes side by side, once the route is known: stripe k's windows are k, k + width, k + 2 × width, ...
  let width = 1;
  const results: Promise<void>[] = [];
  const lends = new StripeLending({
    concurrency: options.concurrency,
    width: () => width,
    newestWindow: async (stripe) => {
      const newest = Math.max(-1, ...[...running.keys()].filter((window) => window % width === stripe));
      const handle = newest < 0 ? undefined : await started.get(newest);
      return handle && { lend: (count: number) => handle.signal(slotsLentSignal, count) };
    },
    hasWindow: (stripe) => [...running.keys()].some((window) => window % width === stripe),
    stopped: () => fatal !== undefined || stoppedBy !== undefined || CancellationScope.current().consideredCancelled,
  });
  /** Whether the first window is the batch's only one (see WindowInput.sole); known once the route is. */
  let sole = false;
  const startWindow = async (window: number, from: WindowStart): Promise<void> => {
    const scope = new CancellationScope();
    const workflowId = windowId(window);
    running.set(window, { workflowId, scope });
    lanesPerWindow[window] = 0;
    const lent = (from.lent ?? 0) + lends.takeWaiting(window % width);
    const windowInput: WindowInput = {
      batchId,
      batchWorkflowId: info.workflowId,
      window,
      file: runs.file,
      fileBytes: runs.fileBytes,
      spool,
      options:
        width > 1
          ? { ...parsed.options, concurrency: stripeConcurrency(options.concurrency, width, window % width) }
          : parsed.options,
      laneShare: laneShareFor(parsed.options),
      agentPlaces: `${sink}.agents`,
      ...from,
      ...(lent > 0 ? { lent } : {}),
      ...(sole && window === 0 ? { sole } : {}),
    };
    const starting = scope
      .run(() =>
        startChild(batchWindow, {
          workflowId,
          args: [windowInput],
          cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
          parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
          staticSummary: `window ${window} of batch ${batchId}`,
        }),
      )
      .catch((error: unknown) => {
        running.delete(window);
        if (!isCancellation(error)) fatal ??= { type: 'WindowNotStarted', message: messageChain(error) };
        changed += 1;
        return undefined;
      });
    started.set(window, starting);
    const handle = await starting;
    if (!handle) return;
    results.push(
      scope
        .run(() => handle.result())
        .then(
          async (result: WindowResult) => {
            ended.add(window);
            lanesPerWindow[window] = result.lanes;
            unsealed.push(...result.unsealed);
            addCounters(counters, result.counters);
            largestRunHistory = Math.max(largestRunHistory, result.historyLength);
            if (result.pacing) pacing = result.pacing;
            if (result.fatal) fatal ??= result.fatal;
            if (result.stoppedBy) stoppedBy ??= result.stoppedBy;
            // Every call this window held has ended: its successor gets all its room.
            const successor = result.handedOver ? await started.get(window + width) : undefined;
            if (successor) await successor.signal(slotsFreedSignal, Number.MAX_SAFE_INTEGER).catch(() => undefined);
            // Calls lent to the window that it did not pass on: to its successor, or, the last of its stripe, onwards.
            const [stripe, unpassed] = [window % width, result.lent ?? 0];
            if (successor && unpassed > 0)
              await successor.signal(slotsLentSignal, unpassed).catch(() => lends.give(stripe, unpassed));
            else if (result.handedOver) await lends.give(stripe, unpassed);
            else if (width > 1) lends.stripeEnded(stripe, unpassed);
          },
          (error: unknown) => {
            // The window's own record of its lanes is lost: the sink takes every lane of it found in the spool.
            lanesPerWindow[window] = -1;
            if (!isCancellation(error)) fatal ??= { type: 'WindowFailed', message: messageChain(error) };
          },
        )
        .finally(async () => {
          running.delete(window);
          changed += 1;
          if (width > 1) await lends.release(window % width);
        }),
    );
    // The predecessor's calls still in flight are borrowed from this window; it returns them as they end.
    const predecessor = running.get(window - width);
    if (predecessor)
      await getExternalWorkflowHandle(predecessor.workflowId)
        .signal(successorSignal, workflowId)
        .catch(() => undefined);
  };

  // The route: how the items are sent. A provider batch first (half price, answers within its deadline), then the items
  // it handed back run sync in the windows; flex and the Responses API are options of the sync calls.
  const deadlineMs = parsed.options?.deadlineMs;
  const requested = parsed.options?.route ?? 'sync';
  // 0.3.0: a budget is never sent as a provider batch (PROVIDER_BATCH_BUDGET_REFUSAL): `auto` goes sync, and
  // `provider-batch` is refused below (a client of this package refuses it before starting).
  const budgeted = hasBudget(parsed.options);
  const route =
    requested === 'auto' ? (budgeted && patched030() ? 'sync' : resolveAutoRoute(total, deadlineMs)) : requested;
  if (route === 'provider-batch' && budgeted && patched030()) {
    throw ApplicationFailure.create({
      type: FailureType.InvalidInput,
      message: `batch ${batchId}: ${PROVIDER_BATCH_BUDGET_REFUSAL}`,
      nonRetryable: true,
    });
  }
  routeState.route = route;
  const api = parsed.options?.api;
  // Anthropic's prompt cache lives an hour for a batch's items, whose shared prefix may be minutes apart.
  // The answer cache goes to the lanes with the route's call options: their input, not a command.
  const cache = parsed.options?.cache;
  const call = {
    ...syncCallOptions(route, api, deadlineMs, startedAtMs),
    ...(parsed.options?.provider === undefined ? {} : { provider: parsed.options.provider }),
    promptCache: parsed.options?.promptCache ?? BATCH_PROMPT_CACHE,
    ...(cache && cache.mode !== 'off' ? { cache } : {}),
  };
  if (route === 'provider-batch' && scan.firstAgentLine !== undefined) {
    // Refused before anything is sent: a provider batch sends single calls, and an agent is a loop of them.
    throw ApplicationFailure.create({
      type: FailureType.InvalidInput,
      message: `${scan.file} line ${scan.firstAgentLine}: an agent (a task with tools or an output schema) cannot go in a provider batch; run the batch with route "sync"${requested === 'auto' ? ' (route "auto" chose a provider batch)' : ''}`,
      nonRetryable: true,
    });
  }

  let cancelled = false;
  try {
    let first: WindowStart | undefined = {
      cursor: 0,
      firstPage: scan.firstPage,
      retries: [],
      borrowed: 0,
      unstarted: total,
      ...(scan.typicalCallMs === undefined ? {} : { callMs: scan.typicalCallMs }),
      spent: { tokens: 0, usd: 0 },
      ...(call ? { call } : {}),
    };
    // A resume whose items were all answered already has nothing to send (a first run of nothing fails its scan).
    if (total === 0) first = undefined;
    else if (route === 'provider-batch') {
      const sending = sendProviderBatches({
        batchId,
        workflowId: providerBatchWorkflowId(batchId, info.firstExecutionRunId),
        file: scan.file,
        spool,
        deadlineAtMs: startedAtMs + (deadlineMs ?? DAY_MS),
        options: parsed.options,
        routeState,
      });
      // A failed route still has answers in its provider segments: the batch fails once the sink holds them.
      const sent = patched030()
        ? await sending.catch((error: unknown) => {
            if (isCancellation(error)) throw error;
            fatal ??= { type: 'ProviderBatchFailed', message: messageChain(error) };
            return undefined;
          })
        : await sending;
      if (sent === undefined) throw new RouteFailed();
      addCounters(counters, { succeeded: sent.succeeded, failed: sent.failed, tokens: sent.tokens, cost: sent.cost });
      // What expired or failed retryably is sent again sync, in windows of their own.
      if (patched030()) {
        // As a task file the windows page through: 0.2.0 carried every entry in one result and the first window's input.
        const handBack =
          sent.retry === undefined
            ? undefined
            : await io.handBackTasks({
                source: scan.file,
                retry: sent.retry,
                file: childOf(childOf(spool, 'provider'), 'hand-back.jsonl'),
                firstPageSize: pageLimit(options),
              });
        if (handBack !== undefined && handBack.total > 0) {
          runs = { file: handBack.file, fileBytes: handBack.fileBytes };
          first = { ...first, cursor: 0, firstPage: handBack.firstPage, unstarted: handBack.total };
        } else first = undefined;
      } else {
        const retries: BatchEntry[] = sent.retry === undefined ? [] : await io.readRetryEntries({ uri: sent.retry });
        first =
          retries.length === 0
            ? undefined
            : {
                ...first,
                cursor: scan.fileBytes,
                firstPage: { entries: [], nextOffset: scan.fileBytes, eof: true },
                retries: retries.map((entry) => ({ entry, attempts: 0 })),
                unstarted: 0,
              };
      }
    }
    const stripes = route === 'provider-batch' ? undefined : scan.stripes;
    width = stripes?.length ?? 1;
    // The whole file in the scan's first page, one stripe, sent sync: one window runs it all (unless its history runs
    // out first, when it hands over as any window does).
    sole = route !== 'provider-batch' && width === 1 && scan.firstPage.eof;
    if (first) await Promise.all(stripeStarts(first, stripes).map((from, index) => startWindow(index, from)));
    for (;;) {
      if (fatal !== undefined || stoppedBy !== undefined) {
        // One window stopped the batch: the others stop too (a predecessor may still be draining).
        for (const window of running.values()) window.scope.cancel();
      }
      const handOver = handOvers.shift();
      if (handOver && fatal === undefined && stoppedBy === undefined) {
        const { window, ...rest } = handOver;
        // A window whose result came before its hand-over was dealt with (both in one workflow task) held nothing when it
        // ended, and nothing will return what it held then: its successor borrows none of it.
        await startWindow(window + width, { ...rest, borrowed: ended.has(window) ? 0 : handOver.inFlight });
        continue;
      }
      if (running.size === 0 && handOvers.length === 0) break;
      const seen = changed;
      await condition(() => changed !== seen);
    }
  } catch (error) {
    if (!(error instanceof RouteFailed)) {
      if (!isCancellation(error)) throw error;
      cancelled = true;
    }
  }
  // Every window has ended (a cancelled one after its lanes wrote what they had) before the sink is written.
  await CancellationScope.nonCancellable(() => Promise.all(results));
  phase = cancelled ? 'cancelling' : 'draining';
  const finished = await CancellationScope.nonCancellable(() =>
    io
      .finishBatch({
        sink,
        spool,
        ledger: { windows: Array.from(lanesPerWindow, (lanes) => lanes ?? 0), unsealed },
        resumed,
      })
      .then(
        (assembled) => assembled,
        (error: unknown) => {
          fatal ??= { type: 'ResultsNotWritten', message: messageChain(error) };
          return undefined;
        },
      ),
  );
  upsertMemo({
    progress: {
      total,
      done: counters.succeeded + counters.failed,
      failed: counters.failed,
      runs: lanesPerWindow.length,
    },
  });
  if (fatal !== undefined) {
    throw ApplicationFailure.create({
      type: fatal.type,
      message: `batch ${batchId} failed: ${fatal.message}`,
      nonRetryable: true,
    });
  }
  if (cancelled) {
    throw new CancelledFailure(
      `batch ${batchId} cancelled; ${finished?.counts.succeeded ?? 0} answered and ${finished?.counts.failed ?? 0} failed items are in ${sink}`,
    );
  }
  phase = 'finished';
  const counts = finished?.counts ?? counters;
  return {
    batchId,
    sink,
    total,
    succeeded: counts.succeeded,
    failed: counts.failed,
    alreadyOk,
    notRun: Math.max(0, total - counts.succeeded - counts.failed),
    tokens: counts.tokens,
    cost: counts.cost,
    wallMs: Date.now() - startedAtMs,
    runs: lanesPerWindow.length,
    largestRunHistory,
    ...(finished ? { sinkBytes: finished.sinkBytes } : {}),
    ...(stoppedBy === undefined ? {} : { stoppedBy }),
    ...(pacing ? { pacing } : {}),
    route,
    ...(routeState.providerBatches ? { providerBatches: routeState.providerBatches } : {}),
    ...(routeState.savingsUsd === undefined ? {} : { savingsUsd: routeState.savingsUsd }),
  };
}
