/** What the gate describes: a Temporal `WorkflowHandle`, or a run handle of `FanoutClient`. */
export interface DescribableRun {
  /** `preparing`: the run has nothing to show yet (a batch before its first window), so no query is due. */
  describe(): Promise<{ runId: string; historyLength: number; preparing?: boolean }>;
}

/**
 * Keeps a watcher from paying for queries that cannot tell it anything new. Temporal Cloud bills every query as an
 * action; DescribeWorkflowExecution is free, and its history length (with the run id, which changes on
 * continue-as-new) moves whenever anything happened in the run. So a watcher describes often and queries only when
 * the run moved, and then at most once per `minIntervalMs`.
 *
 * @example
 * const gate = new QueryGate(handle, { minIntervalMs: 2000 });
 * while (running) {
 *   if (await gate.due()) render(await handle.progress());
 *   await sleep(500);
 * }
 */
export class QueryGate {
  private seen: string | undefined;
  private lastQueryAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly run: DescribableRun,
    private readonly options: { minIntervalMs: number },
  ) {}

  /**
   * True when the run moved since the last query that was let through and the interval has passed, and it is not still
   * preparing.
   */
  async due(now: number = Date.now()): Promise<boolean> {
    if (now - this.lastQueryAt < this.options.minIntervalMs) return false;
    const description = await this.run.describe();
    if (description.preparing) return false;
    const mark = `${description.runId}:${description.historyLength}`;
    if (mark === this.seen) return false;
    this.seen = mark;
    this.lastQueryAt = now;
    return true;
  }
}
