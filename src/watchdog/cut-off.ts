import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../contract/failure-types';
import type { WatchdogLogger } from './watchdog-options';
import type { Presence } from './presence';

/** How often a worker with calls in flight checks whether it has been cut off from Temporal, ms. */
const CHECK_MS = 1000;

/**
 * Peers judge this worker lost once the server has not seen it poll for `lostAfterMs`, and fail its calls so Temporal
 * retries them elsewhere; its own answers would then be refused. So past that silence it aborts its calls itself.
 * Word from the server is an answered presence poll or read, or an answered describe. Neither comes often enough on
 * its own: an empty presence poll is answered only near its deadline (5 s at the default threshold, counted from its
 * start), and a workflow whose workflow tasks run here is described only every 10 s (its cancels come as notices). So
 * once the last word is half the threshold old, with calls to lose, the guard asks for some itself: one free
 * DescribeTaskQueue of the presence queue (Presence.read), for the whole worker, at most once per check.
 */
export class CutOffGuard {
  /** Aborts are per call: a cut-off worker ends every call of a chunk. */
  private readonly aborts = new Set<(reason: unknown) => void>();
  private timer: NodeJS.Timeout | undefined;
  private cutOff = false;
  /** When (local clock) a describe last started that the server answered, even with an error. */
  private describedAt = 0;
  /** A presence read the guard asked for is out. */
  private asking = false;

  constructor(
    private readonly presence: Presence,
    private readonly identity: string,
    private readonly lostAfterMs: number,
    private readonly logger: WatchdogLogger,
  ) {}

  /** A describe started at `startedAt` was answered: word from the server. */
  describeAnswered(startedAt: number): void {
    this.describedAt = Math.max(this.describedAt, startedAt);
  }

  /** Calls `abort` once this worker is cut off, unless `release` is called first. */
  add(abort: (reason: unknown) => void): void {
    this.aborts.add(abort);
  }

  release(abort: (reason: unknown) => void): void {
    this.aborts.delete(abort);
  }

  /** Starts checking (idempotent): while calls are in flight. */
  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.check(), Math.min(CHECK_MS, this.lostAfterMs / 4));
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.cutOff = false;
  }

  /** Stops checking and forgets every call. */
  clear(): void {
    this.stop();
    this.aborts.clear();
  }

  private check(): void {
    const silentForMs = Date.now() - Math.max(this.presence.lastContactAt, this.describedAt);
    if (silentForMs > this.lostAfterMs / 2 && this.aborts.size > 0) this.ask();
    if (silentForMs <= this.lostAfterMs) {
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
          lostAfterMs: this.lostAfterMs,
          calls: this.aborts.size,
        },
      );
    }
    const reason = ApplicationFailure.create({
      type: FailureType.WorkerLost,
      message: `this worker could not reach Temporal for ${silentForMs} ms (FANOUT_LOST_WORKER_MS ${this.lostAfterMs}); the call was aborted so that it is retried`,
      details: [{ worker: this.identity, silentForMs }],
    });
    for (const abort of [...this.aborts]) {
      this.aborts.delete(abort);
      abort(reason);
    }
  }

  /** One presence read (it records the contact when answered); a failed one only means no word yet. */
  private ask(): void {
    if (this.asking) return;
    this.asking = true;
    // Not older than a check: a table read before the last word would add none.
    void this.presence
      .read(Math.min(CHECK_MS, this.lostAfterMs / 4))
      .catch(() => undefined)
      .finally(() => {
        this.asking = false;
      });
  }
}
