import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { FailureType } from '../contract/failure-types';
import { isLost, Presence, timestampMillis } from './presence';

/**
 * What agent calls need from Temporal while they run, without heartbeating every second (each heartbeat that reaches
 * Temporal Cloud is a billed action, and a 60 s call cost ~31 of them):
 *
 * - Cancellation. DescribeWorkflowExecution is free, and its pending activities say CANCEL_REQUESTED as soon as the
 *   workflow cancels one. Each worker describes every workflow it has calls of in flight once a second (one describe
 *   per workflow, shared by all its calls there); a call it sees cancelled sends ONE heartbeat, whose answer makes the
 *   SDK abort the call's signal, which closes the HTTP request. The same look catches a call whose attempt the server
 *   already gave up on (timed out, workflow closed, paused): one heartbeat, and the SDK learns it.
 * - Lost workers. Every worker polls the presence queue (presence.ts). Calls that a lost worker was running are failed
 *   on its behalf (RespondActivityTaskFailedById, free), so Temporal retries them at once instead of at start-to-close;
 *   calls a lost worker was asked to cancel are reported cancelled, so a cancelled run does not wait on a dead worker.
 *   The worker that sees it does it: one describing the workflow anyway, or the periodic sweep over the task queue's
 *   running workflows, which finds calls of a lost worker in workflows no live worker has calls in.
 * - Being lost. A worker whose presence polls have not reached the server for `lostAfterMs` is what its peers judge
 *   lost: they fail its calls so Temporal retries them. So it aborts those calls itself (each call's `abort`), rather
 *   than pay the provider for answers Temporal will refuse.
 *
 * Every read backs off while it fails (describes per workflow, the sweep), so a worker whose server is gone waits
 * quietly: one warning when reads start failing, one line when they work again.
 */
export interface CallWatchdogOptions {
  /** How often a workflow with calls of this worker in flight is described, ms. Env FANOUT_WATCH_INTERVAL_MS; default 1000. */
  watchIntervalMs: number;
  /** A worker that has not polled for this long is lost, ms. Env FANOUT_LOST_WORKER_MS; default 15000. */
  lostAfterMs: number;
  /** How often the task queue's running workflows are swept for calls of lost workers, ms. Env FANOUT_SWEEP_INTERVAL_MS; default 10000. */
  sweepIntervalMs: number;
  /** Describe calls in flight at once during a sweep. Default 4. */
  sweepConcurrency: number;
  /** After the last call of a watched workflow ends, how long presence keeps polling (lazily created watchdogs), ms. Default 60000. */
  idleMs: number;
}

export interface WatchedCall {
  workflowId: string;
  runId: string;
  activityId: string;
  attempt: number;
  /** Sends one heartbeat; its answer tells the SDK what the server wants (cancel, gone, paused). */
  poke(): void;
  /** Ends the call (its HTTP request) with `reason`: this worker was cut off from Temporal for longer than `lostAfterMs`. */
  abort?(reason: unknown): void;
}

export interface WatchdogLogger {
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
}

const { PendingActivityState, WorkflowExecutionStatus } = temporal.api.enums.v1;
type PendingActivity = temporal.api.workflow.v1.IPendingActivityInfo;
type Description = temporal.api.workflowservice.v1.IDescribeWorkflowExecutionResponse;

/** A poke is repeated this long after the last one if the server still says the same (the first may have been throttled). */
const REPOKE_MS = 5000;
/**
 * Longest pause between describes of a workflow whose describes fail (throttled, server away): once they work again,
 * the workflow's lost calls are judged within it, well inside the minute a dead worker's call may wait.
 */
const MAX_LOOK_BACKOFF_MS = 8000;
/** The sweep lists at most this many running workflows, and describes at most SWEEP_BATCH of them per round, in turn. */
const SWEEP_LIST_LIMIT = 100_000;
const SWEEP_BATCH = 5000;
/** How often a worker with calls in flight checks whether it has been cut off from Temporal, ms. */
const CUT_OFF_CHECK_MS = 1000;

/**
 * Whether a failed read got as far as the server (which then refused it: throttled, not found ...). Only a transport
 * failure, or a deadline that ran out, says nothing came back.
 */
function reachedServer(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' && code !== 1 && code !== 4 && code !== 14;
}

interface WatchEntry {
  call: WatchedCall;
  pokedAt: number;
  refs: number;
}

interface WorkflowWatch {
  workflowId: string;
  runId: string;
  calls: Map<string, WatchEntry>;
  timer?: NodeJS.Timeout;
  /** Describes that failed in a row: the next look waits longer. */
  failures: number;
}

function integer(value: unknown): number {
  return typeof value === 'number' ? value : Number(value ?? 0);
}

export class CallWatchdog {
  private readonly presence: Presence;
  private readonly workflows = new Map<string, WorkflowWatch>();
  private readonly acted = new Map<string, number>();
  private readonly aborts = new Set<(reason: unknown) => void>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private sweepQueue: string | undefined;
  private sweepCursor = 0;
  private sweepFailures = 0;
  private cutOffTimer: NodeJS.Timeout | undefined;
  private cutOff = false;
  private describeFailures = 0;
  /** When (local clock) a describe last started that the server answered, even with an error. */
  private describedAt = 0;
  private stopped = false;

  constructor(
    private readonly client: Client,
    readonly identity: string,
    private readonly options: CallWatchdogOptions,
    private readonly logger: WatchdogLogger,
  ) {
    this.presence = new Presence(client, identity, {
      failing: (error, failures) =>
        logger.warn('presence polls failing; retrying with backoff', { error: String(error), failures }),
      recovered: (failures) => logger.info('presence polls work again', { failedPolls: failures }),
    });
  }

  private get namespace(): string {
    return this.client.options.namespace;
  }

  private describe(workflowId: string, runId?: string): Promise<Description> {
    const connection = this.client.connection;
    return connection.withAbortSignal(new AbortController().signal, () =>
      connection.withDeadline(Date.now() + 10_000, () =>
        this.client.workflowService.describeWorkflowExecution({
          namespace: this.namespace,
          execution: { workflowId, runId },
        }),
      ),
    );
  }

  /** Watches one running call until the returned function is called. */
  register(call: WatchedCall): () => void {
    this.stopped = false;
    clearTimeout(this.idleTimer);
    this.presence.start();
    const key = `${call.workflowId}\u0000${call.runId}`;
    let watch = this.workflows.get(key);
    if (!watch) {
      watch = { workflowId: call.workflowId, runId: call.runId, calls: new Map(), failures: 0 };
      this.workflows.set(key, watch);
      this.schedule(watch);
      this.watchForCutOff();
    }
    // Several calls of one activity (a batch chunk) share its entry: one poke reaches them all, the last one out removes it.
    const existing = watch.calls.get(call.activityId);
    const entry: WatchEntry =
      existing && existing.call.attempt === call.attempt ? existing : { call, pokedAt: 0, refs: 0 };
    // Aborts are per call, not per entry: a cut-off worker ends every call of a chunk.
    const abort = call.abort?.bind(call);
    if (abort) this.aborts.add(abort);
    entry.refs += 1;
    watch.calls.set(call.activityId, entry);
    const current = watch;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (abort) this.aborts.delete(abort);
      entry.refs -= 1;
      if (entry.refs > 0 || current.calls.get(call.activityId) !== entry) return;
      current.calls.delete(call.activityId);
      if (current.calls.size === 0) {
        clearTimeout(current.timer);
        this.workflows.delete(key);
        if (this.workflows.size === 0) this.stopWatchingForCutOff();
        this.idleLater();
      }
    };
  }

  private idleLater(): void {
    if (this.sweepQueue !== undefined || this.workflows.size > 0) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.workflows.size === 0 && this.sweepQueue === undefined) void this.presence.stop();
    }, this.options.idleMs);
    this.idleTimer.unref();
  }

  private schedule(watch: WorkflowWatch): void {
    // A little jitter, so the watches of many workers and workflows do not describe in lockstep; doubling while they fail.
    const interval = this.options.watchIntervalMs;
    // Capped well under the lost-worker threshold: a throttled describe is still word from the server (see checkCutOff).
    const longest = Math.max(interval, Math.min(MAX_LOOK_BACKOFF_MS, this.options.lostAfterMs / 3));
    const base = watch.failures === 0 ? interval : Math.min(longest, interval * 2 ** watch.failures);
    const delay = base * (0.85 + Math.random() * 0.3);
    watch.timer = setTimeout(() => {
      void this.look(watch).finally(() => {
        if (this.workflows.get(`${watch.workflowId}\u0000${watch.runId}`) === watch && !this.stopped)
          this.schedule(watch);
      });
    }, delay);
    watch.timer.unref();
  }

  private async look(watch: WorkflowWatch): Promise<void> {
    let description: Description;
    const startedAt = Date.now();
    try {
      description = await this.describe(watch.workflowId, watch.runId);
      this.describedAt = Math.max(this.describedAt, startedAt);
    } catch (error) {
      if (reachedServer(error)) this.describedAt = Math.max(this.describedAt, startedAt);
      // NOT_FOUND: the run is gone (deleted); each call's heartbeat will hear the same and stop.
      if ((error as { code?: unknown }).code === 5) {
        for (const entry of watch.calls.values()) this.poke(entry);
        return;
      }
      // Throttled or unreachable: look again later, and later still while it lasts. Presence and the sweep go on.
      watch.failures += 1;
      this.describeFailed(error);
      return;
    }
    watch.failures = 0;
    this.describeWorked();
    const closed =
      description.workflowExecutionInfo?.status !== WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING;
    const pending = new Map(
      (description.pendingActivities ?? []).map((activity) => [activity.activityId ?? '', activity]),
    );
    for (const entry of watch.calls.values()) {
      const activity = pending.get(entry.call.activityId);
      const attention =
        closed ||
        activity === undefined ||
        activity.state === PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED ||
        activity.paused === true ||
        integer(activity.attempt) > entry.call.attempt;
      if (attention) this.poke(entry);
    }
    if (!closed) await this.judge(watch.workflowId, watch.runId, description.pendingActivities ?? []);
  }

  /** One warning when describes start failing (any workflow), one line when they work again: never one per look. */
  private describeFailed(error: unknown): void {
    this.describeFailures += 1;
    if (this.describeFailures === 1)
      this.logger.warn('describes failing; looking again with backoff', { error: String(error) });
  }

  private describeWorked(): void {
    if (this.describeFailures > 0) this.logger.info('describes work again', { failedDescribes: this.describeFailures });
    this.describeFailures = 0;
  }

  private watchForCutOff(): void {
    if (this.cutOffTimer !== undefined) return;
    this.cutOffTimer = setInterval(() => this.checkCutOff(), Math.min(CUT_OFF_CHECK_MS, this.options.lostAfterMs / 4));
    this.cutOffTimer.unref();
  }

  private stopWatchingForCutOff(): void {
    clearInterval(this.cutOffTimer);
    this.cutOffTimer = undefined;
    this.cutOff = false;
  }

  /**
   * Peers judge this worker lost once the server has not seen it poll for `lostAfterMs`, and fail its calls so Temporal
   * retries them elsewhere; its own answers would then be refused. So past that silence it aborts its calls itself.
   * Word from the server is an answered presence poll or read, or an answered describe: with calls in flight their
   * workflows are described every `watchIntervalMs` (an empty presence poll ends at its deadline, which proves nothing).
   */
  private checkCutOff(): void {
    const silentForMs = Date.now() - Math.max(this.presence.lastContactAt, this.describedAt);
    if (silentForMs <= this.options.lostAfterMs) {
      if (this.cutOff) this.logger.info('in touch with Temporal again');
      this.cutOff = false;
      return;
    }
    if (this.aborts.size === 0) return;
    if (!this.cutOff) {
      this.cutOff = true;
      this.logger.warn(
        "cut off from Temporal longer than the lost-worker threshold: aborting this worker's calls, which its peers retry",
        {
          silentForMs,
          lostAfterMs: this.options.lostAfterMs,
          calls: this.aborts.size,
        },
      );
    }
    const reason = ApplicationFailure.create({
      type: FailureType.WorkerLost,
      message: `this worker could not reach Temporal for ${silentForMs} ms (FANOUT_LOST_WORKER_MS ${this.options.lostAfterMs}); the call was aborted so that it is retried`,
      details: [{ worker: this.identity, silentForMs }],
    });
    for (const abort of [...this.aborts]) {
      this.aborts.delete(abort);
      abort(reason);
    }
  }

  private poke(entry: { call: WatchedCall; pokedAt: number }): void {
    const now = Date.now();
    if (now - entry.pokedAt < REPOKE_MS) return;
    entry.pokedAt = now;
    entry.call.poke();
  }

  /** Fails (or reports cancelled) the calls of this workflow that lost workers were running. */
  private async judge(workflowId: string, runId: string, activities: readonly PendingActivity[]): Promise<void> {
    const suspects = activities.filter(
      (activity) =>
        (activity.state === PendingActivityState.PENDING_ACTIVITY_STATE_STARTED ||
          activity.state === PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED) &&
        activity.lastWorkerIdentity &&
        activity.lastWorkerIdentity !== this.identity,
    );
    if (suspects.length === 0) return;
    const table = await this.presence.read().catch(() => undefined);
    if (!table) return;
    for (const activity of suspects) {
      const worker = activity.lastWorkerIdentity ?? '';
      const startedAt = timestampMillis(activity.lastStartedTime);
      if (!isLost(table, worker, startedAt, this.options.lostAfterMs)) continue;
      const activityId = activity.activityId ?? '';
      const attempt = integer(activity.attempt);
      const actedKey = `${workflowId}\u0000${runId}\u0000${activityId}\u0000${attempt}`;
      if (this.acted.has(actedKey)) continue;
      this.acted.set(actedKey, Date.now());
      const silentForMs = table.self === undefined ? undefined : table.self - (table.lastPoll.get(worker) ?? 0);
      const id = { workflowId, runId, activityId };
      try {
        if (activity.state === PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED) {
          await this.client.activity.reportCancellation(id, undefined);
          this.logger.info("reported a lost worker's cancelled call as cancelled", {
            workflowId,
            activityId,
            attempt,
            worker,
            silentForMs,
          });
        } else {
          await this.client.activity.fail(
            id,
            ApplicationFailure.create({
              type: FailureType.WorkerLost,
              message: `worker ${worker} stopped polling ${silentForMs ?? '?'} ms before; attempt ${attempt} failed on its behalf so it is retried`,
              details: [{ worker, attempt }],
            }),
          );
          this.logger.info("failed a lost worker's call so Temporal retries it", {
            workflowId,
            activityId,
            attempt,
            worker,
            silentForMs,
          });
        }
      } catch (error) {
        // Usually a race with the call finishing or timing out meanwhile; either way nothing is left to do.
        this.logger.warn("could not settle a lost worker's call", { workflowId, activityId, error: String(error) });
      }
    }
    this.forgetOldActions();
  }

  private forgetOldActions(): void {
    const cutoff = Date.now() - 10 * 60_000;
    for (const [key, at] of this.acted) if (at < cutoff) this.acted.delete(key);
  }

  /**
   * Keeps presence up and sweeps the running workflows of `taskQueue` every `sweepIntervalMs` until stopped: what a
   * worker process does for its whole life, so that calls of a lost worker are retried even when no live worker has
   * a call in the same workflow.
   */
  startSweeping(taskQueue: string): void {
    if (this.sweepQueue === taskQueue) return;
    this.stopped = false;
    this.sweepQueue = taskQueue;
    clearTimeout(this.idleTimer);
    this.presence.start();
    const tick = () => {
      // Failing lists back off to four intervals; a working sweep keeps its interval.
      const backoff = Math.min(4, 2 ** this.sweepFailures);
      this.sweepTimer = setTimeout(
        () => {
          void this.sweep(taskQueue).finally(() => {
            if (this.sweepQueue === taskQueue && !this.stopped) tick();
          });
        },
        this.options.sweepIntervalMs * backoff * (0.85 + Math.random() * 0.3),
      );
      this.sweepTimer.unref();
    };
    tick();
  }

  private async sweep(taskQueue: string): Promise<void> {
    let listed: { workflowId: string; runId: string }[] = [];
    try {
      const query = `TaskQueue = '${taskQueue.replace(/'/g, "\\'")}' AND ExecutionStatus = 'Running'`;
      for await (const execution of this.client.workflow.list({ query, pageSize: 1000 })) {
        if (!this.workflows.has(`${execution.workflowId}\u0000${execution.runId}`))
          listed.push({ workflowId: execution.workflowId, runId: execution.runId });
        if (listed.length >= SWEEP_LIST_LIMIT) break;
      }
    } catch (error) {
      this.sweepFailures += 1;
      if (this.sweepFailures === 1)
        this.logger.warn('could not list running workflows for the lost-worker sweep; retrying with backoff', {
          taskQueue,
          error: String(error),
        });
      return;
    }
    if (this.sweepFailures > 0)
      this.logger.info('the lost-worker sweep lists again', { taskQueue, failedLists: this.sweepFailures });
    this.sweepFailures = 0;
    // More than a round's worth: describe the next SWEEP_BATCH in turn, so every running workflow is reached.
    if (listed.length > SWEEP_BATCH) {
      const start = this.sweepCursor % listed.length;
      listed = [...listed.slice(start), ...listed.slice(0, start)].slice(0, SWEEP_BATCH);
      this.sweepCursor = start + SWEEP_BATCH;
    }
    const runs = listed;
    const next = async (): Promise<void> => {
      for (let run = runs.shift(); run !== undefined && !this.stopped; run = runs.shift()) {
        try {
          const description = await this.describe(run.workflowId, run.runId);
          await this.judge(run.workflowId, run.runId, description.pendingActivities ?? []);
        } catch (error) {
          // NOT_FOUND: closed or deleted meanwhile. Throttled or unreachable: the round ends here, the next one goes on.
          if ((error as { code?: unknown }).code !== 5) {
            this.describeFailed(error);
            runs.length = 0;
          }
        }
      }
    };
    await Promise.all(Array.from({ length: this.options.sweepConcurrency }, next));
  }

  /** Stops sweeping (a worker shutting down); calls still in flight stay watched and presence stays up while they run. */
  stopSweeping(): void {
    this.sweepQueue = undefined;
    clearTimeout(this.sweepTimer);
    this.idleLater();
  }

  /** Stops sweeping, watching and polling. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.sweepQueue = undefined;
    clearTimeout(this.sweepTimer);
    clearTimeout(this.idleTimer);
    this.stopWatchingForCutOff();
    this.aborts.clear();
    for (const watch of this.workflows.values()) clearTimeout(watch.timer);
    this.workflows.clear();
    await this.presence.stop();
  }
}
