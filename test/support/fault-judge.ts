import type { ProviderBatchStats } from '../../src/sim/provider-batches';
import type { SimulatedRequest } from '../../src/sim/simulator';
import { openAtAnyFault, type Fault } from './request-ledger';

/**
 * The fault schedule's judge beyond `faultCost` (request-ledger.ts): when a stop reached the batch, what started after
 * it, what a kill may re-send, and what the provider-batch route did. Each reads only the simulator's own records.
 */

/**
 * When a stop (a cancel, a budget) reached the batch: the first call it aborted (its connection closed by the client
 * at or after `from` and before `closed`, by a worker not in `killed`: a SIGKILL closes the dead worker's connections
 * too); if it aborted none, `recorded` (the workflow's own record: its first lane asked to cancel), else `closed` (the
 * run's close).
 */
export function stopReachedAt(
  requests: readonly SimulatedRequest[],
  from: number,
  closed: number,
  recorded: number | undefined,
  killed: ReadonlySet<string> = new Set(),
): number {
  let reached: number | undefined;
  for (const request of requests) {
    const at = request.clientClosedAt;
    if (at === undefined || at < from || at > closed || (reached !== undefined && at >= reached)) continue;
    if (request.worker !== undefined && killed.has(request.worker)) continue;
    reached = at;
  }
  return reached ?? Math.min(recorded ?? closed, closed);
}

/**
 * Calls that started once a stop had reached the batch (`reached`) and before anything ran it again (`until`, a
 * resume): each is spend the stop promised not to make. `perLane`: only calls started by a worker and window (its lane's
 * window, x-fanout-caller) after that worker aborted a call of that window: every lane of a window on a worker stops in
 * the turn the first of them hears of the cancel (WindowStops), while other windows and workers hear of it at their own
 * next look, up to a second later.
 */
export function startedAfterStop(
  requests: readonly SimulatedRequest[],
  reached: number,
  until: number,
  perLane = false,
): { id: string; arrived: number; worker?: string; caller?: string }[] {
  const laneOf = (request: SimulatedRequest) => `${request.worker ?? ''}\u0000${request.caller ?? ''}`;
  const firstAbort = new Map<string, number>();
  for (const request of requests) {
    const at = request.clientClosedAt;
    if (at === undefined || at < reached || at >= until) continue;
    const lane = laneOf(request);
    firstAbort.set(lane, Math.min(at, firstAbort.get(lane) ?? Infinity));
  }
  return requests
    .filter(
      (request) =>
        request.arrivedAt < until &&
        request.arrivedAt > (perLane ? (firstAbort.get(laneOf(request)) ?? Infinity) : reached),
    )
    .map((request) => ({
      id: request.taskId,
      arrived: request.arrivedAt - reached,
      ...(request.worker === undefined ? {} : { worker: request.worker }),
      ...(request.caller === undefined ? {} : { caller: request.caller }),
    }));
}

/**
 * What a SIGKILL at `at` of the worker named `killed` may cost, until the next fault (`until`): the ids sent again
 * after it are at most the calls the killed worker had open (by the x-fanout-worker header each request carries; a call
 * it had an answer for less than `settleMs` before the kill counts, as the worker may not have read it), and none of the
 * survivors' open calls is among them. An id whose requests before the kill had all ended unanswered (aborted by an
 * earlier cancel or by its own live worker, refused), or that was open at one of the `earlier` faults, goes again for
 * that, not for the kill.
 */
export function killCharge(
  requests: readonly SimulatedRequest[],
  at: number,
  killed: string,
  until: number,
  earlier: readonly Fault[] = [],
  settleMs = 1000,
): { sentAgain: string[]; victims: string[]; survivorsSentAgain: string[] } {
  const endOf = (request: SimulatedRequest) => request.respondedAt ?? request.clientClosedAt ?? Infinity;
  const before = requests.filter((request) => request.arrivedAt <= at);
  // A call open at an earlier fault (aborted by a cancel whose resume sends it again only after this kill) is that
  // fault's to excuse, not this kill's. Nor is a call a live worker aborted itself before the kill, unanswered (a lane
  // the cancel reached late, on another worker): it has no answer to lose, and it goes again for that stop.
  const abortedByLiveWorker = (request: SimulatedRequest) =>
    request.respondedAt === undefined &&
    request.clientClosedAt !== undefined &&
    request.clientClosedAt < at &&
    request.worker !== undefined &&
    request.worker !== killed;
  const charged = new Set(
    before
      .filter((request) => endOf(request) > at - settleMs || request.outcome === 200)
      .filter((request) => !openAtAnyFault(request, earlier) && !abortedByLiveWorker(request))
      .map((request) => request.taskId),
  );
  const sentAgain = new Set(
    requests
      .filter((request) => request.arrivedAt > at && request.arrivedAt < until && charged.has(request.taskId))
      .map((request) => request.taskId),
  );
  const victims = new Set(
    before
      .filter((request) => request.worker === killed && endOf(request) > at - settleMs)
      .map((request) => request.taskId),
  );
  return {
    sentAgain: [...sentAgain],
    victims: [...victims],
    survivorsSentAgain: before
      .filter((request) => request.worker !== killed && endOf(request) > at && sentAgain.has(request.taskId))
      .map((request) => request.taskId),
  };
}

/**
 * What the provider-batch route of batch `batchId` did at the simulator: its provider batches (by the metadata each
 * carries), parts created more than once (must be none: a retried submit finds its batch), the items the provider
 * answered (none of them twice), and those of them also sent as chat completions (must be none: an answered item is never paid twice).
 */
export function providerRoute(
  stats: ProviderBatchStats,
  batchId: string,
  requests: readonly SimulatedRequest[],
): {
  created: number;
  answered: number;
  partsCreatedTwice: string[];
  answeredTwice: string[];
  answeredAndSentSync: string[];
} {
  const mine = stats.batches.filter((batch) => batch.metadata.fanout_batch === batchId);
  const parts = new Map<string, number>();
  for (const batch of mine) {
    const part = `${batch.metadata.fanout_run}/${batch.metadata.fanout_part}`;
    parts.set(part, (parts.get(part) ?? 0) + 1);
  }
  const answeredIds = mine.flatMap((batch) => batch.answered ?? []);
  const answered = new Set(answeredIds);
  const sentSync = new Set(requests.map((request) => request.taskId));
  return {
    created: mine.length,
    answered: answeredIds.length,
    partsCreatedTwice: [...parts].filter(([, count]) => count > 1).map(([part]) => part),
    answeredTwice: answeredIds.filter((id, index) => answeredIds.indexOf(id) !== index),
    answeredAndSentSync: [...answered].filter((id) => sentSync.has(id)),
  };
}

/**
 * How long before a stop reached the batch an answer must have been written for the stop to owe it: a live worker
 * reads an answer already in its socket before the abort (deadlineSignal's `afterArrived`), so only the loopback and
 * the simulator's own event loop stand between the two records.
 */
export const STOP_MARGIN_MS = 50;

/**
 * Ids the simulator answered more than `marginMs` before a stop (a cancel, a budget) reached the batch at `reached`
 * and that were sent again after: an answer the live worker had and dropped. A request open at one of `earlier` (a
 * kill: its worker may have died before reading the answer; `settleMs` as for faultCost) is that fault's, not this one's.
 */
export function answeredBeforeStopSentAgain(
  requests: readonly SimulatedRequest[],
  reached: number,
  earlier: readonly { at: number; until: number }[],
  marginMs = STOP_MARGIN_MS,
  settleMs = 1000,
): string[] {
  const endOf = (request: SimulatedRequest) => request.respondedAt ?? request.clientClosedAt ?? Infinity;
  const answeredAt = new Map<string, number>();
  for (const request of requests) {
    const end = endOf(request);
    if (request.outcome !== 200 || end >= reached - marginMs) continue;
    if (earlier.some((fault) => request.arrivedAt <= fault.until && end > fault.at - settleMs)) continue;
    answeredAt.set(request.taskId, Math.min(end, answeredAt.get(request.taskId) ?? Infinity));
  }
  return [
    ...new Set(
      requests
        .filter((request) => request.arrivedAt > (answeredAt.get(request.taskId) ?? Infinity))
        .map((request) => request.taskId),
    ),
  ];
}
