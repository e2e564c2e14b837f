import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { CutOffGuard } from './cut-off';
import { RunningActivities } from './running-activities';
import { Describes, integer, type Description } from './describes';
import { HostedRuns } from './hosted-runs';
import { LostCalls } from './lost-calls';
import { Presence, presencePollMs } from './presence';
import { notFound, reachedServer } from './server-errors';
import type { CallWatchdogOptions, WatchdogLogger } from './watchdog-options';

export type { CallWatchdogOptions, WatchdogLogger } from './watchdog-options';

/**
 * What agent calls need from Temporal while they run, without heartbeating every second (each heartbeat that reaches
 * Temporal Cloud is a billed action, and a 60 s call cost ~31 of them):
 *
 * - Cancellation. DescribeWorkflowExecution is free, and its pending activities say CANCEL_REQUESTED as soon as the
 *   workflow cancels one. A call it sees cancelled sends ONE heartbeat, whose answer makes the SDK abort the call's
 *   signal, which closes the HTTP request. The same look catches a call whose attempt the server already gave up on
 *   (timed out, workflow closed, paused): one heartbeat, and the SDK learns it. When to look: a workflow whose workflow
 *   tasks run on this worker says so through the call-notices sink (`hosted`, src/workflows/call-notices.ts), and says
 *   when one of its cancellation scopes is cancelled (`cancelNotice`): the watchdog looks then, within a fraction of a
 *   second, and otherwise only every `hostedWatchIntervalMs` (10 s), for what no notice says (a terminated run, a timed
 *   out attempt, a lost worker's calls). A workflow run elsewhere is described every `watchIntervalMs` (1 s), one
 *   describe per workflow shared by all its calls here. So 200 agents of 1 s steps cost no describes at all.
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

export interface WatchedCall {
  workflowId: string;
  runId: string;
  activityId: string;
  attempt: number;
  /** Sends one heartbeat; its answer tells the SDK what the server wants (cancel, gone, paused). */
  poke(): void;
  /** Ends the call (its HTTP request) with `reason`: this worker was cut off from Temporal for longer than `lostAfterMs`. */
  abort?(reason: unknown): void;
  /**
   * The server has recorded a cancel request for this call's activity (a describe said CANCEL_REQUESTED): called once,
   * at that look, for every call of the activity registered with it. The poke's answer says the same one round trip
   * later, per activity; this tells every activity of the run that one look found cancelled in the same turn (a batch
   * window's lanes on this worker stop together, not each when its own heartbeat comes back).
   */
  cancelRequested?(): void;
  /**
   * Look at this call's run every `watchIntervalMs` even while its workflow is hosted here: a batch lane runs for
   * minutes, and its window's workflow tasks may move to another worker meanwhile (after a kill or a server restart),
   * whose workflow code then gets the cancel notices; trusting them here left a lane starting calls up to 10 s after its
   * window was cancelled. One describe a second per window, shared by all its lanes here.
   */
  everyLook?: boolean;
}

const { PendingActivityState, WorkflowExecutionStatus } = temporal.api.enums.v1;

/** A poke is repeated this long after the last one if the server still says the same (the first may have been throttled). */
const REPOKE_MS = 5000;
/**
 * Longest pause between describes of a workflow whose describes fail (throttled, server away): once they work again,
 * the workflow's lost calls are judged within it, well inside the minute a dead worker's call may wait.
 */
const MAX_LOOK_BACKOFF_MS = 8000;
/**
 * After a cancel notice the first look waits this long: sinks are called before the workflow task's completion (with
 * its cancel commands) is sent, and a look before the server has recorded them would see nothing to poke.
 */
const NOTICE_LOOK_DELAY_MS = 250;
/** After a cancel notice, looks come at `watchIntervalMs` for this long, in case the first came too early. */
const NOTICE_FAST_MS = 5000;

interface WatchEntry {
  call: WatchedCall;
  pokedAt: number;
  refs: number;
  /** The `cancelRequested` of each call registered on the entry (told once, when a look first sees the cancel). */
  onCancel: Set<() => void>;
  cancelSeen: boolean;
}

interface WorkflowWatch {
  workflowId: string;
  runId: string;
  calls: Map<string, WatchEntry>;
  timer?: NodeJS.Timeout;
  /** Describes that failed in a row: the next look waits longer. */
  failures: number;
  /** The run's workflow tasks run on this worker (it said so through the call-notices sink). */
  hosted: boolean;
  /** Until when looks come at `watchIntervalMs` whether hosted or not (after a cancel notice). */
  fastUntil: number;
  /** A call here asked to be looked at every `watchIntervalMs`, hosted or not (`WatchedCall.everyLook`). */
  everyLook: boolean;
  /** When a notice asked for the next look (consumed by `schedule`). */
  noticeAt?: number;
  /** A describe of this run is out. */
  looking: boolean;
}

function runKey(workflowId: string, runId: string): string {
  return `${workflowId}\u0000${runId}`;
}

export class CallWatchdog {
  private readonly presence: Presence;
  private readonly describes: Describes;
  private readonly cutOff: CutOffGuard;
  private readonly lostCalls: LostCalls;
  private readonly workflows = new Map<string, WorkflowWatch>();
  /** The activities this worker runs (its interceptor is the worker's innermost, see RunningActivities). */
  readonly running = new RunningActivities();
  /** Runs whose workflow tasks ran here lately (the call-notices sink). */
  private readonly hostedRuns = new HostedRuns();
  /** When each run's last cancel notice came, for a call that registers just after it (kept NOTICE_FAST_MS). */
  private readonly noticed = new Map<string, number>();
  private idleTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    client: Client,
    readonly identity: string,
    private readonly options: CallWatchdogOptions,
    logger: WatchdogLogger,
  ) {
    const presence = new Presence(
      client,
      identity,
      {
        failing: (error, failures) =>
          logger.warn('presence polls failing; retrying with backoff', { error: String(error), failures }),
        recovered: (failures) => logger.info('presence polls work again', { failedPolls: failures }),
      },
      presencePollMs(options.lostAfterMs),
    );
    this.presence = presence;
    this.running.onStart = (workflowId, runId, activityId) => this.hostedRuns.started(workflowId, runId, activityId);
    this.describes = new Describes(client, logger);
    this.cutOff = new CutOffGuard(presence, identity, options.lostAfterMs, logger);
    this.lostCalls = new LostCalls({
      client,
      identity,
      presence,
      describes: this.describes,
      options,
      logger,
      watching: (workflowId, runId) => this.workflows.has(runKey(workflowId, runId)),
      stopped: () => this.stopped,
      running: this.running,
      hostedRuns: this.hostedRuns,
    });
  }

  /** Watches one running call until the returned function is called. */
  register(call: WatchedCall): () => void {
    this.stopped = false;
    clearTimeout(this.idleTimer);
    this.presence.start();
    const key = runKey(call.workflowId, call.runId);
    let watch = this.workflows.get(key);
    if (!watch) {
      watch = {
        workflowId: call.workflowId,
        runId: call.runId,
        calls: new Map(),
        failures: 0,
        hosted: this.hostedRuns.has(HostedRuns.key(call.workflowId, call.runId)),
        fastUntil: 0,
        everyLook: false,
        looking: false,
      };
      // A cancel noticed a moment before this call started (dispatched, not yet running) is looked at as if just now.
      const noticedAt = this.noticed.get(key);
      if (noticedAt !== undefined && Date.now() - noticedAt < NOTICE_FAST_MS) {
        watch.fastUntil = noticedAt + NOTICE_FAST_MS;
        watch.noticeAt = noticedAt + NOTICE_LOOK_DELAY_MS;
      }
      this.workflows.set(key, watch);
      this.schedule(watch);
      this.cutOff.start();
    }
    if (call.everyLook && !watch.everyLook) {
      watch.everyLook = true;
      // A watch that waits out a hosted run's long interval takes the short one from now on.
      if (watch.hosted && !watch.looking) {
        clearTimeout(watch.timer);
        this.schedule(watch);
      }
    }
    // Several calls of one activity (a batch chunk) share its entry: one poke reaches them all, the last one out removes it.
    const existing = watch.calls.get(call.activityId);
    const entry: WatchEntry =
      existing && existing.call.attempt === call.attempt
        ? existing
        : { call, pokedAt: 0, refs: 0, onCancel: new Set(), cancelSeen: false };
    const abort = call.abort?.bind(call);
    if (abort) this.cutOff.add(abort);
    const cancelled = call.cancelRequested?.bind(call);
    if (cancelled) {
      if (entry.cancelSeen) cancelled();
      else entry.onCancel.add(cancelled);
    }
    entry.refs += 1;
    watch.calls.set(call.activityId, entry);
    const current = watch;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (abort) this.cutOff.release(abort);
      if (cancelled) entry.onCancel.delete(cancelled);
      entry.refs -= 1;
      if (entry.refs > 0 || current.calls.get(call.activityId) !== entry) return;
      current.calls.delete(call.activityId);
      if (current.calls.size === 0) {
        clearTimeout(current.timer);
        this.workflows.delete(key);
        if (this.workflows.size === 0) this.cutOff.stop();
        this.idleLater();
      }
    };
  }

  /**
   * A workflow task of this run, run on this worker, scheduled an activity (the call-notices sink): its cancels will be
   * noticed here, so its calls here are described only every `hostedWatchIntervalMs`.
   */
  hosted(workflowId: string, runId: string, activityId?: string): void {
    this.hostedRuns.scheduled(workflowId, runId, activityId);
    const watch = this.workflows.get(runKey(workflowId, runId));
    if (watch) watch.hosted = true;
  }

  /** The run's workflow function ended here (the call-notices sink): the own-task check need not look at it. */
  finished(workflowId: string, runId: string): void {
    this.hostedRuns.ended(workflowId, runId);
  }

  /** A cancellation scope of this run was cancelled (the call-notices sink): look at its calls here now. */
  cancelNotice(workflowId: string, runId: string): void {
    const key = runKey(workflowId, runId);
    const now = Date.now();
    for (const [run, at] of this.noticed) if (now - at >= NOTICE_FAST_MS) this.noticed.delete(run);
    this.noticed.set(key, now);
    const watch = this.workflows.get(key);
    if (!watch || this.stopped) return;
    watch.fastUntil = Date.now() + NOTICE_FAST_MS;
    watch.noticeAt = Date.now() + NOTICE_LOOK_DELAY_MS;
    // A look that is out schedules the next one when it ends, which takes the notice.
    if (watch.looking) return;
    clearTimeout(watch.timer);
    this.schedule(watch);
  }

  private idleLater(): void {
    if (this.lostCalls.sweeping !== undefined || this.workflows.size > 0) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.workflows.size === 0 && this.lostCalls.sweeping === undefined) void this.presence.stop();
    }, this.options.idleMs);
    this.idleTimer.unref();
  }

  private schedule(watch: WorkflowWatch): void {
    // A little jitter, so the watches of many workers and workflows do not describe in lockstep; doubling while they fail.
    const now = Date.now();
    const interval =
      watch.hosted && !watch.everyLook && now >= watch.fastUntil
        ? (this.options.hostedWatchIntervalMs ?? this.options.watchIntervalMs * 10)
        : this.options.watchIntervalMs;
    // Capped well under the lost-worker threshold: a throttled describe is still word from the server (see CutOffGuard).
    const longest = Math.max(interval, Math.min(MAX_LOOK_BACKOFF_MS, this.options.lostAfterMs / 3));
    const base = watch.failures === 0 ? interval : Math.min(longest, interval * 2 ** watch.failures);
    const jittered = base * (0.85 + Math.random() * 0.3);
    const delay = watch.noticeAt === undefined ? jittered : Math.min(jittered, Math.max(0, watch.noticeAt - now));
    watch.noticeAt = undefined;
    watch.timer = setTimeout(() => {
      watch.looking = true;
      void this.look(watch).finally(() => {
        watch.looking = false;
        if (this.workflows.get(runKey(watch.workflowId, watch.runId)) === watch && !this.stopped) this.schedule(watch);
      });
    }, delay);
    watch.timer.unref();
  }

  private async look(watch: WorkflowWatch): Promise<void> {
    let description: Description;
    const startedAt = Date.now();
    try {
      description = await this.describes.read(watch.workflowId, watch.runId);
      this.cutOff.describeAnswered(startedAt);
    } catch (error) {
      if (reachedServer(error)) this.cutOff.describeAnswered(startedAt);
      // NOT_FOUND: the run is gone (deleted); each call's heartbeat will hear the same and stop.
      if (notFound(error)) {
        for (const entry of watch.calls.values()) this.poke(entry);
        return;
      }
      // Throttled or unreachable: look again later, and later still while it lasts. Presence and the sweep go on.
      watch.failures += 1;
      this.describes.failed(error);
      return;
    }
    watch.failures = 0;
    this.describes.worked();
    const closed =
      description.workflowExecutionInfo?.status !== WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING;
    const pending = new Map(
      (description.pendingActivities ?? []).map((activity) => [activity.activityId ?? '', activity]),
    );
    // Every call this look finds cancelled hears of it first, in one turn; then each activity is poked.
    for (const entry of watch.calls.values()) {
      const activity = pending.get(entry.call.activityId);
      if (entry.cancelSeen || activity?.state !== PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED)
        continue;
      if (integer(activity.attempt) !== entry.call.attempt) continue;
      entry.cancelSeen = true;
      for (const cancelled of entry.onCancel) cancelled();
      entry.onCancel.clear();
    }
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
    if (!closed) await this.lostCalls.judge(watch.workflowId, watch.runId, description.pendingActivities ?? []);
  }

  private poke(entry: WatchEntry): void {
    const now = Date.now();
    if (now - entry.pokedAt < REPOKE_MS) return;
    entry.pokedAt = now;
    entry.call.poke();
  }

  /**
   * Keeps presence up and sweeps the running workflows of `taskQueue` every `sweepIntervalMs` until stopped: what a
   * worker process does for its whole life, so that calls of a lost worker are retried even when no live worker has
   * a call in the same workflow.
   */
  startSweeping(taskQueue: string): void {
    if (this.lostCalls.sweeping === taskQueue) return;
    this.stopped = false;
    clearTimeout(this.idleTimer);
    this.presence.start();
    this.lostCalls.startSweeping(taskQueue);
  }

  /** Stops sweeping (a worker shutting down); calls still in flight stay watched and presence stays up while they run. */
  stopSweeping(): void {
    this.lostCalls.stopSweeping();
    this.idleLater();
  }

  /** Stops sweeping, watching and polling. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.lostCalls.stopSweeping();
    clearTimeout(this.idleTimer);
    this.cutOff.clear();
    for (const watch of this.workflows.values()) clearTimeout(watch.timer);
    this.workflows.clear();
    await this.presence.stop();
  }
}
