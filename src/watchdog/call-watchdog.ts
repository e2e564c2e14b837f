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

interface WorkflowWatch {
  workflowId: string;
  runId: string;
  calls: Map<string, { call: WatchedCall; pokedAt: number; refs: number }>;
  timer?: NodeJS.Timeout;
}

function integer(value: unknown): number {
  return typeof value === 'number' ? value : Number(value ?? 0);
}

export class CallWatchdog {
  private readonly presence: Presence;
  private readonly workflows = new Map<string, WorkflowWatch>();
  private readonly acted = new Map<string, number>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private sweepQueue: string | undefined;
  private stopped = false;

  constructor(
    private readonly client: Client,
    readonly identity: string,
    private readonly options: CallWatchdogOptions,
    private readonly logger: WatchdogLogger,
  ) {
    this.presence = new Presence(client, identity, (error) => logger.warn('presence poll failed', { error: String(error) }));
  }

  private get namespace(): string {
    return this.client.options.namespace;
  }

  private describe(workflowId: string, runId?: string): Promise<Description> {
    const connection = this.client.connection;
    return connection.withAbortSignal(new AbortController().signal, () =>
      connection.withDeadline(Date.now() + 10_000, () =>
        this.client.workflowService.describeWorkflowExecution({ namespace: this.namespace, execution: { workflowId, runId } }),
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
      watch = { workflowId: call.workflowId, runId: call.runId, calls: new Map() };
      this.workflows.set(key, watch);
      this.schedule(watch);
    }
    // Several calls of one activity (a batch chunk) share its entry: one poke reaches them all, the last one out removes it.
    const existing = watch.calls.get(call.activityId);
    const entry = existing && existing.call.attempt === call.attempt ? existing : { call, pokedAt: 0, refs: 0 };
    entry.refs += 1;
    watch.calls.set(call.activityId, entry);
    const current = watch;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      entry.refs -= 1;
      if (entry.refs > 0 || current.calls.get(call.activityId) !== entry) return;
      current.calls.delete(call.activityId);
      if (current.calls.size === 0) {
        clearTimeout(current.timer);
        this.workflows.delete(key);
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
    // A little jitter, so the watches of many workers and workflows do not describe in lockstep.
    const delay = this.options.watchIntervalMs * (0.85 + Math.random() * 0.3);
    watch.timer = setTimeout(() => {
      void this.look(watch).finally(() => {
        if (this.workflows.get(`${watch.workflowId}\u0000${watch.runId}`) === watch && !this.stopped) this.schedule(watch);
      });
    }, delay);
    watch.timer.unref();
  }

  private async look(watch: WorkflowWatch): Promise<void> {
    let description: Description;
    try {
      description = await this.describe(watch.workflowId, watch.runId);
    } catch (error) {
      // NOT_FOUND: the run is gone (deleted); each call's heartbeat will hear the same and stop.
      if ((error as { code?: unknown }).code === 5) for (const entry of watch.calls.values()) this.poke(entry);
      return;
    }
    const closed = description.workflowExecutionInfo?.status !== WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING;
    const pending = new Map((description.pendingActivities ?? []).map((activity) => [activity.activityId ?? '', activity]));
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
          this.logger.info('reported a lost worker\'s cancelled call as cancelled', { workflowId, activityId, attempt, worker, silentForMs });
        } else {
          await this.client.activity.fail(
            id,
            ApplicationFailure.create({
              type: FailureType.WorkerLost,
              message: `worker ${worker} stopped polling ${silentForMs ?? '?'} ms before; attempt ${attempt} failed on its behalf so it is retried`,
              details: [{ worker, attempt }],
            }),
          );
          this.logger.info('failed a lost worker\'s call so Temporal retries it', { workflowId, activityId, attempt, worker, silentForMs });
        }
      } catch (error) {
        // Usually a race with the call finishing or timing out meanwhile; either way nothing is left to do.
        this.logger.warn('could not settle a lost worker\'s call', { workflowId, activityId, error: String(error) });
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
      this.sweepTimer = setTimeout(() => {
        void this.sweep(taskQueue).finally(() => {
          if (this.sweepQueue === taskQueue && !this.stopped) tick();
        });
      }, this.options.sweepIntervalMs * (0.85 + Math.random() * 0.3));
      this.sweepTimer.unref();
    };
    tick();
  }

  private async sweep(taskQueue: string): Promise<void> {
    const runs: { workflowId: string; runId: string }[] = [];
    try {
      const query = `TaskQueue = '${taskQueue.replace(/'/g, "\\'")}' AND ExecutionStatus = 'Running'`;
      for await (const execution of this.client.workflow.list({ query, pageSize: 1000 })) {
        if (!this.workflows.has(`${execution.workflowId}\u0000${execution.runId}`)) runs.push({ workflowId: execution.workflowId, runId: execution.runId });
        if (runs.length >= 5000) break;
      }
    } catch (error) {
      this.logger.warn('could not list running workflows for the lost-worker sweep', { taskQueue, error: String(error) });
      return;
    }
    const next = async (): Promise<void> => {
      for (let run = runs.shift(); run !== undefined && !this.stopped; run = runs.shift()) {
        try {
          const description = await this.describe(run.workflowId, run.runId);
          await this.judge(run.workflowId, run.runId, description.pendingActivities ?? []);
        } catch {
          // closed or deleted meanwhile
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
    for (const watch of this.workflows.values()) clearTimeout(watch.timer);
    this.workflows.clear();
    await this.presence.stop();
  }
}
