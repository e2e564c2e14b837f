/** Runs remembered, the most recently noticed kept: a run that ended is never said to have ended. */
const MAX_RUNS = 20_000;

/** A run whose workflow tasks ran here and scheduled activities this worker has not seen start here. */
export interface HostedRun {
  workflowId: string;
  runId: string;
}

interface Awaited {
  workflowId: string;
  runId: string;
  /** Activity ids scheduled here and not seen running here, with when (this worker's clock) they were scheduled. */
  activities: Map<string, number>;
}

/**
 * The runs whose workflow tasks run on this worker, as their call notices tell it (src/workflows/call-notices.ts):
 * which are hosted here (their cancels come as notices, so their calls need few describes), and which activities they
 * scheduled here have not been seen starting here. Most start here at once (eager dispatch) and are crossed off by
 * the worker's innermost activity interceptor, at no cost. One that has not started after a grace period went to
 * another worker, waits in the queue, or was lost between the server and this worker: the own-task check (LostCalls)
 * describes its run to tell, at its own cadence.
 */
export class HostedRuns {
  /** Keys of runs hosted here lately, the least recently noticed first. */
  private readonly hosted = new Set<string>();
  /** Runs with activities scheduled here not seen starting here, by key. */
  private readonly awaited = new Map<string, Awaited>();

  static key(workflowId: string, runId: string): string {
    return `${workflowId}\u0000${runId}`;
  }

  has(key: string): boolean {
    return this.hosted.has(key);
  }

  /** A workflow task of this run, run here, scheduled activity `activityId`. */
  scheduled(workflowId: string, runId: string, activityId: string | undefined, now = Date.now()): void {
    const key = HostedRuns.key(workflowId, runId);
    this.hosted.delete(key);
    this.hosted.add(key);
    if (this.hosted.size > MAX_RUNS) this.hosted.delete(this.hosted.values().next().value as string);
    if (activityId === undefined) return;
    let run = this.awaited.get(key);
    if (!run) {
      run = { workflowId, runId, activities: new Map() };
      this.awaited.set(key, run);
      if (this.awaited.size > MAX_RUNS) this.awaited.delete(this.awaited.keys().next().value as string);
    }
    run.activities.set(activityId, now);
  }

  /** An activity of this run started running here (any attempt): it was not lost on its way here. */
  started(workflowId: string, runId: string, activityId: string): void {
    this.settled(workflowId, runId, activityId);
  }

  /** A look found the activity started elsewhere, or ended: nothing of it is left to lose here. */
  settled(workflowId: string, runId: string, activityId: string): void {
    const key = HostedRuns.key(workflowId, runId);
    const run = this.awaited.get(key);
    if (!run) return;
    run.activities.delete(activityId);
    if (run.activities.size === 0) this.awaited.delete(key);
  }

  /** The runs with an activity scheduled at least `graceMs` ago that has not been seen starting here. */
  toLookAt(graceMs: number, now = Date.now()): HostedRun[] {
    const runs: HostedRun[] = [];
    for (const run of this.awaited.values()) {
      for (const at of run.activities.values()) {
        if (now - at < graceMs) continue;
        runs.push({ workflowId: run.workflowId, runId: run.runId });
        break;
      }
    }
    return runs;
  }

  /** The activity ids of this run still awaited, scheduled at or before `before` (the same bound as `toLookAt`). */
  awaitedOf(workflowId: string, runId: string, before: number): string[] {
    const run = this.awaited.get(HostedRuns.key(workflowId, runId));
    return run ? [...run.activities].filter(([, at]) => at <= before).map(([activityId]) => activityId) : [];
  }

  /** The run is gone (closed, deleted, its workflow function ended): nothing of it is left to look at. */
  ended(workflowId: string, runId: string): void {
    this.awaited.delete(HostedRuns.key(workflowId, runId));
  }
}
