/** Runs remembered, the most recently noticed kept: a run that ended is never said to have ended. */
const MAX_RUNS = 20_000;

/** A run whose workflow tasks ran here and scheduled activities (the call-notices sink). */
export interface HostedRun {
  workflowId: string;
  runId: string;
  /** When (this worker's clock) its last activity was scheduled here. */
  scheduledAt: number;
}

/**
 * The runs whose workflow tasks run on this worker, as their call notices tell it (src/workflows/call-notices.ts):
 * which are hosted here (their cancels come as notices, so their calls need few describes), and which of them have
 * activities that nobody has looked at since they were scheduled. A task of those can be lost between the server and
 * this worker with no call of its run watched here, and no describe would come to notice it; the own-task check
 * (LostCalls) describes them at its own cadence until a look finds nothing pending.
 */
export class HostedRuns {
  /** Keys of runs hosted here lately, the least recently noticed first. */
  private readonly hosted = new Set<string>();
  /** Runs with activities scheduled here since a look last found none of theirs pending, by key. */
  private readonly unsettled = new Map<string, HostedRun>();

  static key(workflowId: string, runId: string): string {
    return `${workflowId}\u0000${runId}`;
  }

  has(key: string): boolean {
    return this.hosted.has(key);
  }

  /** A workflow task of this run, run here, scheduled an activity. */
  scheduled(workflowId: string, runId: string, now = Date.now()): void {
    const key = HostedRuns.key(workflowId, runId);
    this.hosted.delete(key);
    this.hosted.add(key);
    if (this.hosted.size > MAX_RUNS) this.hosted.delete(this.hosted.values().next().value as string);
    this.unsettled.delete(key);
    this.unsettled.set(key, { workflowId, runId, scheduledAt: now });
    if (this.unsettled.size > MAX_RUNS) this.unsettled.delete(this.unsettled.keys().next().value as string);
  }

  /** The runs with activities scheduled here that no look has found settled since. */
  toLookAt(): HostedRun[] {
    return [...this.unsettled.values()];
  }

  /**
   * A look that started at `lookedAt` found the run closed, or with nothing pending: it has no task left to lose, unless
   * an activity was scheduled so shortly before that the server had not recorded it (`settleMs`).
   */
  settled(workflowId: string, runId: string, lookedAt: number, settleMs: number): void {
    const key = HostedRuns.key(workflowId, runId);
    const run = this.unsettled.get(key);
    if (run && lookedAt - run.scheduledAt >= settleMs) this.unsettled.delete(key);
  }

  /** The run is gone (closed, deleted): nothing of it is left to look at. */
  ended(workflowId: string, runId: string): void {
    this.unsettled.delete(HostedRuns.key(workflowId, runId));
  }
}
