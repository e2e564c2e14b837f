import type { SimulatedRequest } from '../../src/sim/simulator';

/** The simulator's requests of one batch or run (its calls name it in x-fanout-workflow-id). */
export function requestsOfRun(log: readonly SimulatedRequest[], runId: string): SimulatedRequest[] {
  return log.filter((request) => request.workflowId === runId);
}

/**
 * How long after the simulator wrote an answer the worker may still not have recorded it: the answer sits in the socket
 * until the worker's event loop reads it, and the journal write goes through its thread pool (on these shared 2-core
 * machines, hundreds of ms). A call answered that recently before a fault was in flight for the worker.
 */
const SETTLE_MS = 1000;

/** When a request stopped being open: answered, or closed by the client (an abort). */
function endOf(request: SimulatedRequest): number {
  return request.respondedAt ?? request.clientClosedAt ?? Number.POSITIVE_INFINITY;
}

/**
 * A fault: a moment (a kill), or a stretch from `at` to `until` (a cancel, from the call until the batch has closed: a
 * call the batch's lanes start or answer in between is in flight at it, however late the cancel reaches them).
 */
export type Fault = number | { at: number; until: number };

/**
 * Whether `request` was open at `fault`: arrived by its end and not answered (or closed) `settleMs` before its start.
 */
function openAtFault(request: SimulatedRequest, fault: Fault, settleMs: number): boolean {
  const { at, until } = typeof fault === 'number' ? { at: fault, until: fault } : fault;
  return request.arrivedAt <= until && endOf(request) > at - settleMs;
}

/**
 * Whether `request` was open at one of `faults` (by the rule `faultCost` charges a fault with): such a call may be sent
 * again after a later fault, and counts against the fault it was open at.
 */
export function openAtAnyFault(request: SimulatedRequest, faults: readonly Fault[], settleMs = SETTLE_MS): boolean {
  return faults.some((fault) => openAtFault(request, fault, settleMs));
}

/**
 * What a fault cost, from the simulator's own log: the ids answered before it that were sent again after their answer
 * (must be none), how many ids were sent more than once, the calls open at it (the most a crash or a cancel may
 * re-send), and the requests still open now (must be none once the run has ended). A call open at one of
 * `earlierFaults` (a worker killed while its answer came back) may be sent again after a later fault: it counts
 * against the earlier one's `openAt`, not as answered before this one.
 */
export function faultCost(
  requests: readonly SimulatedRequest[],
  fault: Fault,
  settleMs = SETTLE_MS,
  earlierFaults: readonly Fault[] = [],
): { answeredThenResent: string[]; duplicated: number; openAt: number; openNow: number } {
  const at = typeof fault === 'number' ? fault : fault.at;
  const count = new Map<string, number>();
  for (const request of requests) count.set(request.taskId, (count.get(request.taskId) ?? 0) + 1);
  // When each id was first answered, if settled before `at`; a request of it that arrived after that was sent again.
  const answeredAt = new Map<string, number>();
  for (const request of requests) {
    const end = endOf(request);
    if (
      request.outcome === 200 &&
      end <= at - settleMs &&
      !earlierFaults.some((fault) => openAtFault(request, fault, settleMs))
    )
      answeredAt.set(request.taskId, Math.min(end, answeredAt.get(request.taskId) ?? Infinity));
  }
  const resent = new Set(
    requests
      .filter((request) => request.arrivedAt > (answeredAt.get(request.taskId) ?? Infinity))
      .map((request) => request.taskId),
  );
  return {
    answeredThenResent: [...resent],
    duplicated: [...count.values()].filter((times) => times > 1).length,
    openAt: requests.filter((request) => openAtFault(request, fault, settleMs)).length,
    openNow: requests.filter((request) => endOf(request) === Number.POSITIVE_INFINITY).length,
  };
}

/** Ids the simulator answered with 200. */
export function answeredIds(requests: readonly SimulatedRequest[]): Set<string> {
  return new Set(requests.filter((request) => request.outcome === 200).map((request) => request.taskId));
}

/**
 * The fewest requests open at once between the first request's arrival and the last one's: a batch whose window
 * drained (at a hand-over, a page, a round) shows a zero here.
 */
export function fewestOpenBetweenFirstAndLast(requests: readonly SimulatedRequest[]): number {
  if (requests.length === 0) return 0;
  const lastArrival = Math.max(...requests.map((request) => request.arrivedAt));
  const edges: [number, number][] = [];
  for (const request of requests) edges.push([request.arrivedAt, 1], [endOf(request), -1]);
  // At equal times a start comes before an end: a slot freed and taken again in the same millisecond never was empty.
  edges.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let open = 0;
  let fewest = Number.POSITIVE_INFINITY;
  for (const [time, change] of edges) {
    open += change;
    if (time >= lastArrival) break;
    if (change < 0) fewest = Math.min(fewest, open);
  }
  return fewest === Number.POSITIVE_INFINITY ? open : fewest;
}

/**
 * Answered calls missing from `written` (a sink's ids) that cannot be put down to a race with the stop: answered more
 * than `graceMs` before the stop. A call answered while the stop was aborting it is in flight, like a call open at a
 * crash; any other missing answer is a paid call dropped. The stop is the first call it aborted at the simulator. A stop
 * whose every open call had been answered when it reached them aborts nothing the simulator sees: then the stop is
 * `stopAt`, when it had certainly reached the calls (history.ts's lanesStoppedAt: the first stopped lane's end), and
 * without one every answer it threw away would be judged as dropped however late it came.
 */
export function droppedAnswers(
  requests: readonly SimulatedRequest[],
  written: ReadonlySet<string>,
  options: { stopAt?: number; graceMs?: number } = {},
): string[] {
  const aborted = requests.flatMap((request) => (request.clientClosedAt === undefined ? [] : [request.clientClosedAt]));
  const stopAt = aborted.length > 0 ? Math.min(...aborted) : (options.stopAt ?? Number.POSITIVE_INFINITY);
  const graceMs = options.graceMs ?? SETTLE_MS;
  return requests
    .filter(
      (request) =>
        request.outcome === 200 && !written.has(request.taskId) && (request.respondedAt ?? 0) < stopAt - graceMs,
    )
    .map((request) => request.taskId);
}
