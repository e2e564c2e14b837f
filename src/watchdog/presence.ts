import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { connectionClosed, deadlineExpired } from './server-errors';

/**
 * Which workers are alive, for free. Temporal bills a heartbeat that reaches the server, not a poll, and records when
 * each poller last polled a task queue (DescribeTaskQueue, also free). So every worker keeps a short poll open on one
 * namespace-wide queue that never holds a task, and anyone can read who polled it lately. A worker that stopped
 * polling for `lostAfterMs` (it died, hung, or lost its connection) is lost.
 *
 * The queue is of the sticky kind: sticky queues have one partition, so one DescribeTaskQueue sees every poller
 * (a normal queue spreads its pollers over partitions). Times are compared on the server's clock only: a worker is
 * judged against this worker's own latest poll, never against the local clock.
 */
export const PRESENCE_QUEUE = 'temporal-fanout-presence';

/**
 * A poll's deadline at the default lost-worker threshold (15 s) and above. The server answers an empty poll about a
 * second before it, and the next poll follows at once: a live worker's last poll is up to ~4 s old when read.
 */
const POLL_MS = 5000;
/** The shortest deadline, with half a second to spare: the server refuses a long poll of 2 s ("Context timeout is too short"). */
const MIN_POLL_MS = 2500;
/** A presence table younger than this is reused. */
const TABLE_TTL_MS = 1000;
/** After a failed poll the next waits this long, doubling per failure up to a poll's deadline: an unreachable server costs nothing. */
const FIRST_RETRY_MS = 500;
/** While polls keep failing, a warning at most this often. */
const WARN_EVERY_MS = 60_000;

const { TaskQueueKind, TaskQueueType } = temporal.api.enums.v1;

/**
 * The presence poll's deadline for a lost-worker threshold: a third of it, between MIN_POLL_MS and POLL_MS. A live
 * worker's last poll is up to a poll old (less the server's second), and so is the judge's own, so the threshold must
 * stay well above a poll; a shorter threshold (a test's) gets shorter polls, and the default 15 s keeps 5 s ones.
 */
export function presencePollMs(lostAfterMs: number): number {
  return Math.min(POLL_MS, Math.max(MIN_POLL_MS, Math.round(lostAfterMs / 3)));
}

/** A protobuf timestamp in ms since the epoch. */
export function timestampMillis(
  timestamp: { seconds?: unknown; nanos?: number | null } | null | undefined,
): number | undefined {
  if (!timestamp || timestamp.seconds === undefined || timestamp.seconds === null) return undefined;
  return Number(timestamp.seconds) * 1000 + Math.floor((timestamp.nanos ?? 0) / 1e6);
}

/** The last polls of every worker, on the server's clock. */
export interface PresenceTable {
  /** This worker's own last poll: the server's "now", give or take one poll. */
  self: number | undefined;
  lastPoll: Map<string, number>;
}

/** What presence tells its owner: polls failing (at most one warning a minute while they do) and polls working again. */
export interface PresenceEvents {
  failing(error: unknown, failures: number): void;
  recovered(failures: number): void;
}

export class Presence {
  private polling: Promise<void> | undefined;
  private stopping = new AbortController();
  private table: { at: number; value: Promise<PresenceTable> } | undefined;
  private contactAt = 0;

  constructor(
    private readonly client: Client,
    readonly identity: string,
    private readonly events: PresenceEvents,
    /**
     * A poll's deadline, ms (`presencePollMs`); also the longest wait between failed polls, so a server back from an
     * outage sees this worker again well within the lost-worker threshold.
     */
    private readonly pollMs = POLL_MS,
  ) {}

  /**
   * When (local clock, ms) the server last proved it saw this worker poll: the start of the latest poll it answered.
   * Counted from when polling started, so a worker that was idle is not taken for one cut off.
   */
  get lastContactAt(): number {
    return this.contactAt;
  }

  private get namespace(): string {
    return this.client.options.namespace;
  }

  /** Starts polling (idempotent). */
  start(): void {
    if (this.polling) return;
    this.stopping = new AbortController();
    const signal = this.stopping.signal;
    const connection = this.client.connection;
    this.contactAt = Date.now();
    const pause = (ms: number) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(done, ms);
        timer.unref();
        signal.addEventListener('abort', done, { once: true });
        function done() {
          clearTimeout(timer);
          signal.removeEventListener('abort', done);
          resolve();
        }
      });
    // A worker's client runs on its NativeConnection, which ignores abort signals: stop() would wait out the open
    // poll (up to its deadline, and a worker's shutdown with it). The loop stops waiting for it instead; the poll ends
    // by its deadline or with the connection, its outcome handled by the race.
    const stopped = new Promise<never>((_resolve, reject) =>
      signal.addEventListener('abort', () => reject(new Error('presence stopped')), { once: true }),
    );
    stopped.catch(() => undefined);
    const loop = async (): Promise<void> => {
      let failures = 0;
      let warnedAt = Number.NEGATIVE_INFINITY;
      while (!signal.aborted) {
        const startedAt = Date.now();
        try {
          // Our own abort signal replaces whatever the caller's context carried (an activity's, which ends with it).
          const poll = connection.withAbortSignal(signal, () =>
            connection.withDeadline(startedAt + this.pollMs, () =>
              this.client.workflowService.pollWorkflowTaskQueue({
                namespace: this.namespace,
                // A sticky queue named like its normal queue is served as the normal one (partitioned): keep them apart.
                taskQueue: {
                  name: PRESENCE_QUEUE,
                  kind: TaskQueueKind.TASK_QUEUE_KIND_STICKY,
                  normalName: `${PRESENCE_QUEUE}-normal`,
                },
                identity: this.identity,
              }),
            ),
          );
          await Promise.race([poll, stopped]);
          // A read answered during the poll may have been later word.
          this.contactAt = Math.max(this.contactAt, startedAt);
          if (failures > 0) this.events.recovered(failures);
          failures = 0;
        } catch (error) {
          // A closed connection will never answer again: polling ends quietly.
          if (signal.aborted || connectionClosed(error)) return;
          // An expired deadline is the normal end of an empty poll: no failure, though no proof of contact either.
          if (!deadlineExpired(error)) {
            failures += 1;
            if (Date.now() - warnedAt >= WARN_EVERY_MS) {
              warnedAt = Date.now();
              this.events.failing(error, failures);
            }
            await pause(Math.min(this.pollMs, FIRST_RETRY_MS * 2 ** Math.min(failures - 1, 10)));
          }
        }
        if (Date.now() - startedAt < 200) await pause(200);
      }
    };
    this.polling = loop().finally(() => {
      this.polling = undefined;
    });
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.polling;
  }

  get running(): boolean {
    return this.polling !== undefined;
  }

  /** Who polled the presence queue and when, at most `maxAgeMs` (a second) old. */
  read(maxAgeMs = TABLE_TTL_MS): Promise<PresenceTable> {
    const now = Date.now();
    if (this.table && now - this.table.at < maxAgeMs) return this.table.value;
    const value = this.client.connection
      .withAbortSignal(this.stopping.signal, () =>
        this.client.connection.withDeadline(now + 5000, () =>
          this.client.workflowService.describeTaskQueue({
            namespace: this.namespace,
            taskQueue: { name: PRESENCE_QUEUE, kind: TaskQueueKind.TASK_QUEUE_KIND_STICKY },
            taskQueueType: TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
          }),
        ),
      )
      .then((response) => {
        this.contactAt = Math.max(this.contactAt, now);
        const lastPoll = new Map<string, number>();
        for (const poller of response.pollers ?? []) {
          const at = timestampMillis(poller.lastAccessTime);
          if (poller.identity && at !== undefined) lastPoll.set(poller.identity, at);
        }
        return { self: lastPoll.get(this.identity), lastPoll };
      });
    this.table = { at: now, value };
    value.catch(() => {
      if (this.table?.value === value) this.table = undefined;
    });
    return value;
  }
}

/**
 * True when `identity` is known to have stopped polling for longer than `lostAfterMs` before this worker's own last
 * poll, and the call in question started before that too. Unknown workers (never seen polling, e.g. an older
 * version, or forgotten by the server after five minutes) are never judged lost: their calls fall back to Temporal's
 * own timeouts.
 */
export function isLost(
  table: PresenceTable,
  identity: string,
  startedAt: number | undefined,
  lostAfterMs: number,
): boolean {
  const other = table.lastPoll.get(identity);
  if (table.self === undefined || other === undefined) return false;
  if (table.self - other <= lostAfterMs) return false;
  return startedAt === undefined || table.self - startedAt > lostAfterMs;
}

/**
 * The workers in the table that stopped polling for longer than `lostAfterMs` before this worker's own last poll: only
 * their calls can be judged lost (`isLost`), so only while there are some is there anything for the sweep to find. The
 * server keeps a poller in the table for some five minutes after its last poll, a worker stopped on purpose too.
 */
export function lostWorkers(table: PresenceTable, lostAfterMs: number): string[] {
  const self = table.self;
  if (self === undefined) return [];
  return [...table.lastPoll].filter(([, at]) => self - at > lostAfterMs).map(([worker]) => worker);
}
