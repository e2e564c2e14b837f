/**
 * How many items the next lane of a batch runs one after another. Pure, so it is unit-tested and safe in workflow code.
 *
 * A lane is one activity running its items in a row, one call at a time, each answer recorded in the store as it comes
 * (so a crash re-sends only the call in flight). Deep lanes spread an activity's cost (three history events, a workflow
 * task, a dispatch) over many calls; shallow lanes balance the end of a batch. The rule is guided self-scheduling: a lane
 * takes a share of what is left, `unstarted / (SHARE × concurrency)`, so lanes shrink as the batch nears its end and the
 * last ones are one item long, ending together whatever the calls' lengths. A lane is also capped at about
 * LANE_TARGET_MS of calls once their length is known, so one lane never holds a slot for long.
 */
export interface LaneShapeInput {
  /** Items not started yet (including the ones this lane would take). */
  unstarted: number;
  /** Calls in flight at once across the batch. */
  concurrency: number;
  /** The calls' moving average, ms, once some have answered. */
  callMs: number | undefined;
  /** The most items one lane may run (the batch's `itemsPerActivity`), default MAX_LANE_DEPTH. */
  maxDepth?: number;
  /** A lane takes 1 / (share × concurrency) of what is not started; default PREVIOUS_SHARE (windows started before LANE_SHARE). */
  share?: number;
}

/** How long one lane runs, about, once the calls' length is known. */
export const LANE_TARGET_MS = 45_000;
/** Most items in one lane, whatever the calls' length. */
export const MAX_LANE_DEPTH = 100;
/**
 * A lane takes 1 / (LANE_SHARE × concurrency) of what is not started: classic guided self-scheduling. With half that
 * share (PREVIOUS_SHARE, 2) a batch small against its concurrency (4,000 items at 500) ran in lanes of 1-4 items, about
 * 1,600 of them, and the workflow tasks that replaced hundreds of lanes ending together left the window empty for
 * seconds (docs/BENCHMARKS.md).
 */
export const LANE_SHARE = 1;
/** The share of windows started before LANE_SHARE (their input carries no `laneShare`): they replay with it. */
export const PREVIOUS_SHARE = 2;

/**
 * The share a batch's windows use: LANE_SHARE, or half of it for a batch with a token or dollar budget. A budget is
 * checked as lanes end (a lane reports its spend when it returns), so shallower lanes stop such a batch sooner after
 * it reaches its budget.
 */
export function laneShareFor(options: { tokenBudget?: number; costBudgetUsd?: number } | undefined): number {
  return options?.tokenBudget !== undefined || options?.costBudgetUsd !== undefined ? PREVIOUS_SHARE : LANE_SHARE;
}
/** Before any call has answered, lanes stay this shallow: the calls may be long. */
const UNKNOWN_LENGTH_DEPTH = 8;

export function laneDepth({
  unstarted,
  concurrency,
  callMs,
  maxDepth = MAX_LANE_DEPTH,
  share: shareOf = PREVIOUS_SHARE,
}: LaneShapeInput): number {
  const share = Math.ceil(unstarted / (shareOf * Math.max(1, concurrency)));
  const byLength = callMs === undefined ? UNKNOWN_LENGTH_DEPTH : Math.floor(LANE_TARGET_MS / Math.max(1, callMs));
  return Math.max(1, Math.min(share, byLength, maxDepth, MAX_LANE_DEPTH, Math.max(0, unstarted)));
}

/** Calls one lane runs at once: 1, until the concurrency outgrows what one workflow may keep in flight. */
export function laneParallelism(concurrency: number, maxLanes: number): number {
  return Math.max(1, Math.ceil(concurrency / maxLanes));
}
