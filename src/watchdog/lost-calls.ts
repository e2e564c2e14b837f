import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { FailureType } from '../contract/failure-types';
import type { LostAttemptNote } from '../contract/lost-attempt';
import type { CallWatchdogOptions, WatchdogLogger } from './watchdog-options';
import { integer, type Describes } from './describes';
import { isLost, lostWorkers, timestampMillis, type Presence, type PresenceTable } from './presence';
import { notFound } from './server-errors';
import { RunningActivities } from './running-activities';
import type { HostedRuns } from './hosted-runs';

const { PendingActivityState, WorkflowExecutionStatus } = temporal.api.enums.v1;
export type PendingActivity = temporal.api.workflow.v1.IPendingActivityInfo;

/** The sweep lists at most this many running workflows, and describes at most SWEEP_BATCH of them per round, in turn. */
const SWEEP_LIST_LIMIT = 100_000;
const SWEEP_BATCH = 5000;
/**
 * Every this many rounds the sweep lists and describes every running workflow even while no worker is silent, for the
 * own-task check of tasks handed to this worker by workflows whose workflow tasks run elsewhere (a batch's lanes, calls
 * dispatched through matching): a minute at the default 10 s interval.
 */
const FULL_ROUND_EVERY = 6;
/**
 * An activity scheduled here that has not started here for this long is looked at: most start here within
 * milliseconds of their notice, and a look any sooner might come before the server has the workflow task's commands.
 */
const OWN_TASK_GRACE_MS = 2000;
/** The oldest a look may be when a call is failed or cancelled on it (see `lookAgain`); half the retry interval if less. */
const FRESH_LOOK_MS = 500;

/** A look at a run just before acting on its calls by their ids (LostCalls.lookAgain). */
interface Look {
  /** The activity as this look shows it, if unchanged since `seen` (same attempt, state, worker, start). */
  unchanged(seen: PendingActivity): PendingActivity | undefined;
  /** When a request by id on `activity` must have been sent by (and is cut at), on this worker's clock. */
  deadline(activity: PendingActivity): number;
}

/** The key a call's attempt is acted on under, once. */
function actedKey(workflowId: string, runId: string, activity: PendingActivity): string {
  return `${workflowId}\u0000${runId}\u0000${activity.activityId ?? ''}\u0000${integer(activity.attempt)}`;
}

/** What the calls of lost workers are judged with, beside the watchdog's own parts. */
export interface LostCallsContext {
  client: Client;
  identity: string;
  presence: Presence;
  describes: Describes;
  options: Pick<CallWatchdogOptions, 'lostAfterMs' | 'sweepIntervalMs' | 'sweepConcurrency'>;
  logger: WatchdogLogger;
  /** Whether the watchdog describes this run anyway (it has calls of its own there): the sweep leaves it out. */
  watching(workflowId: string, runId: string): boolean;
  /** Whether the watchdog was stopped: a sweep round ends early. */
  stopped(): boolean;
  /** The activities this worker runs: a call started under its identity that is not among them was lost on its way. */
  running: RunningActivities;
  /** The runs whose workflow tasks run here, with the activities they scheduled here not looked at since. */
  hostedRuns: HostedRuns;
}

/**
 * Calls that lost workers were running are failed on their behalf (RespondActivityTaskFailedById, free), so Temporal
 * retries them at once instead of at start-to-close; calls a lost worker was asked to cancel are reported cancelled, so
 * a cancelled run does not wait on a dead worker. Judged in every workflow this worker describes anyway, and by the
 * periodic sweep over the task queue's running workflows, which reaches those no live worker has calls in (see
 * `sweep` for which it describes when). Each look also fails this worker's own lost tasks (`failOwnLostTasks`).
 */
export class LostCalls {
  private readonly acted = new Map<string, number>();
  /** Lost calls being acted on now (a look of the run under way): another judge of the run leaves them alone. */
  private readonly acting = new Set<string>();
  /** Lost attempts whose note (a heartbeat) went, and those a look was too old to act on (said once), since when. */
  private readonly noted = new Map<string, number>();
  private readonly late = new Map<string, number>();
  private forgotAt = 0;
  /** Own calls (RunningActivities.key) seen started here but not running, since when (this worker's clock). */
  private readonly missingSince = new Map<string, number>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private queue: string | undefined;
  private sweepCursor = 0;
  private sweepFailures = 0;
  private rounds = 0;
  /**
   * Lost workers a whole sweep round found no call of, by the last poll the table showed for them then. The server keeps
   * a stopped worker in the presence table for some five minutes, and every round until then listed and described every
   * running workflow (a worker restarted on purpose cost its peers 1-2 describes per running agent); once a round has
   * looked at them all and found none of its calls, a worker that polls no more cannot start another, and the rounds
   * stop. A call of it seen anywhere afterwards (`judge`) puts it back.
   */
  private readonly settledLost = new Map<string, number>();

  constructor(private readonly context: LostCallsContext) {}

  /** The task queue being swept, if any. */
  get sweeping(): string | undefined {
    return this.queue;
  }

  /** Fails (or reports cancelled) the calls of this workflow that lost workers were running. */
  async judge(workflowId: string, runId: string, activities: readonly PendingActivity[]): Promise<void> {
    const { identity } = this.context;
    this.forgetOldActions();
    await this.failOwnLostTasks(workflowId, runId, activities);
    const suspects = activities.filter(
      (activity) =>
        (activity.state === PendingActivityState.PENDING_ACTIVITY_STATE_STARTED ||
          activity.state === PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED) &&
        activity.lastWorkerIdentity &&
        activity.lastWorkerIdentity !== identity,
    );
    if (suspects.length === 0) return;
    for (const activity of suspects) this.settledLost.delete(activity.lastWorkerIdentity ?? '');
    const table = await this.context.presence.read().catch(() => undefined);
    if (!table) return;
    const lost = suspects.filter((activity) => {
      const key = actedKey(workflowId, runId, activity);
      return (
        isLost(
          table,
          activity.lastWorkerIdentity ?? '',
          timestampMillis(activity.lastStartedTime),
          this.context.options.lostAfterMs,
        ) &&
        !this.acted.has(key) &&
        !this.acting.has(key)
      );
    });
    if (lost.length === 0) return;
    const keys = lost.map((activity) => actedKey(workflowId, runId, activity));
    for (const key of keys) this.acting.add(key);
    try {
      const look = await this.lookAgain(workflowId, runId);
      if (look) await Promise.all(lost.map((seen) => this.settleLost(workflowId, runId, seen, look, table)));
    } finally {
      for (const key of keys) this.acting.delete(key);
    }
  }

  /** Fails (or reports cancelled) one lost worker's call, if `look` still shows it and is fresh enough (lookAgain). */
  private async settleLost(
    workflowId: string,
    runId: string,
    seen: PendingActivity,
    look: Look,
    table: PresenceTable,
  ): Promise<void> {
    const { client, logger } = this.context;
    const activity = look.unchanged(seen);
    if (!activity) return;
    const worker = activity.lastWorkerIdentity ?? '';
    const activityId = activity.activityId ?? '';
    const attempt = integer(activity.attempt);
    const key = actedKey(workflowId, runId, activity);
    const startedAt = timestampMillis(activity.lastStartedTime);
    const silentForMs = table.self === undefined ? undefined : table.self - (table.lastPoll.get(worker) ?? 0);
    const id = { workflowId, runId, activityId };
    const logged = { workflowId, activityId, attempt, worker, silentForMs };
    const deadline = look.deadline(activity);
    if (!this.inTime(deadline, key, logged)) return;
    try {
      if (activity.state === PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED) {
        this.acted.set(key, Date.now());
        await this.byId(deadline, () => client.activity.reportCancellation(id, undefined));
        logger.info("reported a lost worker's cancelled call as cancelled", logged);
        return;
      }
      // The note first: Temporal hands an attempt's last heartbeat details to the next one, which traces the lost
      // attempt from it (a killed worker exports no span of its own). Once an attempt: a heartbeat restarts the
      // attempt's heartbeat timeout, which is what ends it when no look is fresh enough to fail it.
      if (!this.noted.has(key)) {
        this.noted.set(key, Date.now());
        const note: LostAttemptNote = {
          lostAttempt: { worker, attempt, lostAt: Date.now(), ...(startedAt === undefined ? {} : { startedAt }) },
        };
        try {
          await this.byId(deadline, () => client.activity.heartbeat(id, note));
        } catch {
          // Only the retry's trace loses by it: the call is failed all the same.
        }
        if (!this.inTime(deadline, key, logged)) return;
      }
      this.acted.set(key, Date.now());
      await this.byId(deadline, () =>
        client.activity.fail(
          id,
          ApplicationFailure.create({
            type: FailureType.WorkerLost,
            message: `worker ${worker} stopped polling ${silentForMs ?? '?'} ms before; attempt ${attempt} failed on its behalf so it is retried`,
            details: [{ worker, attempt }],
          }),
        ),
      );
      logger.info("failed a lost worker's call so Temporal retries it", logged);
    } catch (error) {
      // Usually a race with the call finishing or timing out meanwhile (then the next look sees another attempt, or
      // none); a request cut at its deadline may not have arrived: either way the next look judges the call again.
      this.acted.delete(key);
      logger.warn("could not settle a lost worker's call", { workflowId, activityId, error: String(error) });
    }
  }

  /** Whether a call acted on by its id can still be sent before `deadline`; said once an attempt when not. */
  private inTime(deadline: number, key: string, logged: Record<string, unknown>): boolean {
    if (Date.now() < deadline) return true;
    if (!this.late.has(key)) {
      this.late.set(key, Date.now());
      this.context.logger.info("left a lost worker's call to a later look: this look was too old to act on", logged);
    }
    return false;
  }

  /** A request by id, cut at `deadline`: one retried by the connection past it could reach a later attempt. */
  private byId<T>(deadline: number, call: () => Promise<T>): Promise<T> {
    return this.context.client.connection.withDeadline(deadline, call);
  }

  /**
   * A look at the run taken just before acting on its calls, and until when it may be acted on. A call is failed or
   * reported cancelled by its id (RespondActivityTaskFailedById): Temporal applies that to whichever attempt is running
   * when it arrives, not to the one a look saw. The attempt a look saw may end meanwhile (another worker's watchdog
   * failed it, or its heartbeat timed out) and the next one start on a live worker; failed in its stead, that one would
   * run on beside a third, both sending the same items, and cancelled in its stead it would run on past its run.
   * Temporal starts the next attempt no sooner than the retry interval after one ends, and the attempt the look saw
   * ended after the look was read; so a call is acted on only if the look still shows the same attempt started by the
   * same worker, and by half that interval after the look was asked for (at most FRESH_LOOK_MS), each request cut at
   * that deadline. Otherwise a later look judges it again.
   */
  private async lookAgain(workflowId: string, runId: string): Promise<Look | undefined> {
    const sentAt = Date.now();
    let pending: readonly PendingActivity[];
    try {
      const description = await this.context.describes.read(workflowId, runId);
      this.context.describes.worked();
      if (description.workflowExecutionInfo?.status !== WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING)
        return undefined;
      pending = description.pendingActivities ?? [];
    } catch (error) {
      // A run that has closed is no failure of the describes.
      if (!notFound(error)) this.context.describes.failed(error);
      return undefined;
    }
    const byId = new Map(pending.map((activity) => [activity.activityId ?? '', activity]));
    return {
      unchanged: (seen) => {
        const now = byId.get(seen.activityId ?? '');
        const same =
          now !== undefined &&
          now.state === seen.state &&
          integer(now.attempt) === integer(seen.attempt) &&
          now.lastWorkerIdentity === seen.lastWorkerIdentity &&
          timestampMillis(now.lastStartedTime) === timestampMillis(seen.lastStartedTime);
        return same ? now : undefined;
      },
      deadline: (activity) => {
        // The least a next attempt waits: the retry policy's first interval (a Duration has a Timestamp's seconds and
        // nanos), or the wait the look shows if shorter. The dev server reports the policy of a running attempt only.
        const waits = [
          timestampMillis(activity.activityOptions?.retryPolicy?.initialInterval),
          timestampMillis(activity.currentRetryInterval),
        ].filter((wait): wait is number => wait !== undefined);
        const retryMs = waits.length === 0 ? undefined : Math.min(...waits);
        return sentAt + (retryMs === undefined ? FRESH_LOOK_MS : Math.min(FRESH_LOOK_MS, retryMs / 2));
      },
    };
  }

  /**
   * Calls Temporal says this worker started that it is not running: the task was lost between the server and the
   * worker (issue 33: an agent's tool call under load), and nothing would end it before its start-to-close timeout.
   * One missing for `lostAfterMs` on this worker's clock (a task just handed over is not running yet, an answer just
   * sent is not recorded yet) is failed WorkerLost, so Temporal retries it at once.
   */
  private async failOwnLostTasks(
    workflowId: string,
    runId: string,
    activities: readonly PendingActivity[],
  ): Promise<void> {
    const { client, identity, logger, running } = this.context;
    if (!running.tracking) return;
    const now = Date.now();
    const missing: PendingActivity[] = [];
    for (const activity of activities) {
      if (activity.state !== PendingActivityState.PENDING_ACTIVITY_STATE_STARTED) continue;
      if (activity.lastWorkerIdentity !== identity) continue;
      const activityId = activity.activityId ?? '';
      const attempt = integer(activity.attempt);
      const key = RunningActivities.key(workflowId, runId, activityId, attempt);
      if (running.has(key)) {
        this.missingSince.delete(key);
        continue;
      }
      const since = this.missingSince.get(key);
      if (since === undefined) {
        this.missingSince.set(key, now);
        continue;
      }
      if (now - since < this.context.options.lostAfterMs || this.acted.has(key)) continue;
      missing.push(activity);
    }
    if (missing.length === 0) return;
    // Failed by its id, as a lost worker's call is: only on a look fresh enough that no later attempt can have started.
    const look = await this.lookAgain(workflowId, runId);
    if (!look) return;
    await Promise.all(
      missing.map(async (seen) => {
        const activity = look.unchanged(seen);
        if (!activity) return;
        const activityId = activity.activityId ?? '';
        const attempt = integer(activity.attempt);
        const key = RunningActivities.key(workflowId, runId, activityId, attempt);
        // It may have begun running here while the look was taken.
        if (running.has(key)) return;
        const since = this.missingSince.get(key) ?? now;
        const logged = { workflowId, activityId, attempt, missingForMs: now - since };
        const deadline = look.deadline(activity);
        if (this.acted.has(key) || !this.inTime(deadline, key, logged)) return;
        this.acted.set(key, Date.now());
        try {
          await this.byId(deadline, () =>
            client.activity.fail(
              { workflowId, runId, activityId },
              ApplicationFailure.create({
                type: FailureType.WorkerLost,
                message: `attempt ${attempt} was recorded as started by this worker (${identity}), which never ran it; failed so it is retried`,
                details: [{ worker: identity, attempt }],
              }),
            ),
          );
          this.missingSince.delete(key);
          logger.warn('failed a call this worker was handed but never ran, so Temporal retries it', logged);
        } catch (error) {
          this.acted.delete(key);
          logger.warn('could not settle a call this worker never ran', { ...logged, error: String(error) });
        }
      }),
    );
  }

  private forgetOldActions(): void {
    // A minute apart at most often: every look judges, most of them finding nothing to act on.
    if (Date.now() - this.forgotAt < 60_000) return;
    this.forgotAt = Date.now();
    for (const [key, at] of this.missingSince) if (at < Date.now() - 10 * 60_000) this.missingSince.delete(key);
    const cutoff = Date.now() - 10 * 60_000;
    for (const [key, at] of this.acted) if (at < cutoff) this.acted.delete(key);
    for (const [key, at] of this.noted) if (at < cutoff) this.noted.delete(key);
    for (const [key, at] of this.late) if (at < cutoff) this.late.delete(key);
  }

  /** Sweeps the running workflows of `taskQueue` every `sweepIntervalMs` until `stopSweeping`. */
  startSweeping(taskQueue: string): void {
    this.queue = taskQueue;
    const tick = () => {
      // Failing lists back off to four intervals; a working sweep keeps its interval.
      const backoff = Math.min(4, 2 ** this.sweepFailures);
      this.sweepTimer = setTimeout(
        () => {
          void this.sweep(taskQueue).finally(() => {
            if (this.queue === taskQueue && !this.context.stopped()) tick();
          });
        },
        this.context.options.sweepIntervalMs * backoff * (0.85 + Math.random() * 0.3),
      );
      this.sweepTimer.unref();
    };
    tick();
  }

  stopSweeping(): void {
    this.queue = undefined;
    clearTimeout(this.sweepTimer);
  }

  /**
   * One round. While the presence table shows a worker silent for longer than `lostAfterMs` (only then can a call be
   * judged lost) it lists and describes the task queue's running workflows; otherwise it describes only the runs hosted
   * here with an activity scheduled here that has not started here after OWN_TASK_GRACE_MS (the own-task check: it may
   * have been lost between the server and this worker), and every FULL_ROUND_EVERY rounds all of them again, for the
   * tasks that reached this worker from runs hosted elsewhere (unless the presence table shows no other worker). So
   * while nothing is lost, agents whose calls start where they were scheduled cost no describes.
   */
  private async sweep(taskQueue: string): Promise<void> {
    const { options } = this.context;
    this.rounds += 1;
    // An unreadable table finds no lost worker: judge() could not act on one without it.
    const table = await this.context.presence.read().catch(() => undefined);
    const ownTasks = this.context.running.tracking;
    const silent = table === undefined ? [] : lostWorkers(table, options.lostAfterMs);
    const lost = table === undefined ? [] : this.unsettled(table, silent);
    // A task reaches this worker from a run hosted elsewhere only if another worker runs workflow tasks: alone on the
    // presence queue (or beside workers that stopped polling), it needs no full round for its own tasks.
    const alone =
      table !== undefined &&
      [...table.lastPoll.keys()].every((worker) => worker === this.context.identity || silent.includes(worker));
    const full = lost.length > 0 || (ownTasks && !alone && this.rounds % FULL_ROUND_EVERY === 0);
    let runs: { workflowId: string; runId: string }[];
    let whole = false;
    if (full) {
      // While a silent worker is unsettled, the runs watched here are described too: the round must see every running
      // workflow to settle it (a watched run's call of it may outlive the watch, which looks no more once it ends).
      const listed = await this.listRunning(taskQueue, lost.length > 0);
      if (listed === undefined) return;
      ({ runs, whole } = listed);
    } else if (ownTasks) {
      runs = this.context.hostedRuns.toLookAt(this.ownTaskGraceMs);
    } else return;
    const clean = await this.describeAndJudge(runs, lost);
    if (table !== undefined && whole && clean)
      for (const worker of lost) this.settledLost.set(worker, table.lastPoll.get(worker) ?? 0);
  }

  /** The lost workers of `table` (`silent`) that no whole round has settled since their last poll; forgets the rest. */
  private unsettled(table: PresenceTable, silent: readonly string[]): string[] {
    for (const [worker, at] of this.settledLost) if (table.lastPoll.get(worker) !== at) this.settledLost.delete(worker);
    return silent.filter((worker) => !this.settledLost.has(worker));
  }

  /**
   * The running workflows of `taskQueue` not watched here (`withWatched`: watched too), at most SWEEP_BATCH of them in
   * turn (`whole`: all of them); undefined if unlisted.
   */
  private async listRunning(
    taskQueue: string,
    withWatched = false,
  ): Promise<{ runs: { workflowId: string; runId: string }[]; whole: boolean } | undefined> {
    const { client, logger } = this.context;
    let listed: { workflowId: string; runId: string }[] = [];
    try {
      const query = `TaskQueue = '${taskQueue.replace(/'/g, "\\'")}' AND ExecutionStatus = 'Running'`;
      for await (const execution of client.workflow.list({ query, pageSize: 1000 })) {
        if (withWatched || !this.context.watching(execution.workflowId, execution.runId))
          listed.push({ workflowId: execution.workflowId, runId: execution.runId });
        if (listed.length >= SWEEP_LIST_LIMIT) break;
      }
    } catch (error) {
      this.sweepFailures += 1;
      if (this.sweepFailures === 1)
        logger.warn('could not list running workflows for the lost-worker sweep; retrying with backoff', {
          taskQueue,
          error: String(error),
        });
      return undefined;
    }
    if (this.sweepFailures > 0)
      logger.info('the lost-worker sweep lists again', { taskQueue, failedLists: this.sweepFailures });
    this.sweepFailures = 0;
    // More than a round's worth: describe the next SWEEP_BATCH in turn, so every running workflow is reached.
    if (listed.length > SWEEP_BATCH) {
      const start = this.sweepCursor % listed.length;
      listed = [...listed.slice(start), ...listed.slice(0, start)].slice(0, SWEEP_BATCH);
      this.sweepCursor = start + SWEEP_BATCH;
      return { runs: listed, whole: false };
    }
    return { runs: listed, whole: true };
  }

  private get ownTaskGraceMs(): number {
    return Math.min(OWN_TASK_GRACE_MS, this.context.options.sweepIntervalMs);
  }

  /**
   * Crosses off the activities this run scheduled here (before the grace) that a look found started by another worker
   * or no longer pending; those started under this worker's identity and not running here stay (failOwnLostTasks
   * judges them), and so do those still waiting in the queue.
   */
  private settleHosted(workflowId: string, runId: string, lookedAt: number, pending: readonly PendingActivity[]): void {
    const { hostedRuns, identity } = this.context;
    const byId = new Map(pending.map((activity) => [activity.activityId ?? '', activity]));
    for (const activityId of hostedRuns.awaitedOf(workflowId, runId, lookedAt - this.ownTaskGraceMs)) {
      const activity = byId.get(activityId);
      const startedElsewhere =
        activity !== undefined &&
        activity.state !== PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED &&
        activity.lastWorkerIdentity !== identity;
      if (activity === undefined || startedElsewhere) hostedRuns.settled(workflowId, runId, activityId);
    }
  }

  /**
   * Describes `runs` and judges what they have pending. True when every one was looked at (or had closed) and none had a
   * call started by one of `lost`.
   */
  private async describeAndJudge(
    runs: { workflowId: string; runId: string }[],
    lost: readonly string[] = [],
  ): Promise<boolean> {
    const { describes, hostedRuns } = this.context;
    let clean = true;
    const next = async (): Promise<void> => {
      for (let run = runs.shift(); run !== undefined && !this.context.stopped(); run = runs.shift()) {
        const lookedAt = Date.now();
        try {
          const description = await describes.read(run.workflowId, run.runId);
          const pending = description.pendingActivities ?? [];
          if (description.workflowExecutionInfo?.status !== WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING) {
            hostedRuns.ended(run.workflowId, run.runId);
            continue;
          }
          if (pending.some((activity) => lost.includes(activity.lastWorkerIdentity ?? ''))) clean = false;
          await this.judge(run.workflowId, run.runId, pending);
          this.settleHosted(run.workflowId, run.runId, lookedAt, pending);
        } catch (error) {
          // NOT_FOUND: closed or deleted meanwhile. Throttled or unreachable: the round ends here, the next one goes on.
          if (notFound(error)) hostedRuns.ended(run.workflowId, run.runId);
          else {
            describes.failed(error);
            runs.length = 0;
            clean = false;
          }
        }
      }
    };
    await Promise.all(Array.from({ length: this.context.options.sweepConcurrency }, next));
    return clean && !this.context.stopped();
  }
}
