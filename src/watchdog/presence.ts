import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

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

/** A poll's deadline. The server answers an empty poll a little before it, and the next poll follows at once. */
const POLL_MS = 5000;
/** A presence table younger than this is reused. */
const TABLE_TTL_MS = 1000;

const { TaskQueueKind, TaskQueueType } = temporal.api.enums.v1;

/** A protobuf timestamp in ms since the epoch. */
export function timestampMillis(timestamp: { seconds?: unknown; nanos?: number | null } | null | undefined): number | undefined {
  if (!timestamp || timestamp.seconds === undefined || timestamp.seconds === null) return undefined;
  return Number(timestamp.seconds) * 1000 + Math.floor((timestamp.nanos ?? 0) / 1e6);
}

/** The last polls of every worker, on the server's clock. */
export interface PresenceTable {
  /** This worker's own last poll: the server's "now", give or take one poll. */
  self: number | undefined;
  lastPoll: Map<string, number>;
}

export class Presence {
  private polling: Promise<void> | undefined;
  private stopping = new AbortController();
  private table: { at: number; value: Promise<PresenceTable> } | undefined;

  constructor(
    private readonly client: Client,
    readonly identity: string,
    private readonly onError: (error: unknown) => void,
  ) {}

  private get namespace(): string {
    return this.client.options.namespace;
  }

  /** Starts polling (idempotent). */
  start(): void {
    if (this.polling) return;
    this.stopping = new AbortController();
    const signal = this.stopping.signal;
    const connection = this.client.connection;
    const loop = async (): Promise<void> => {
      while (!signal.aborted) {
        const startedAt = Date.now();
        try {
          // Our own abort signal replaces whatever the caller's context carried (an activity's, which ends with it).
          await connection.withAbortSignal(signal, () =>
            connection.withDeadline(startedAt + POLL_MS, () =>
              this.client.workflowService.pollWorkflowTaskQueue({
                namespace: this.namespace,
                // A sticky queue named like its normal queue is served as the normal one (partitioned): keep them apart.
                taskQueue: { name: PRESENCE_QUEUE, kind: TaskQueueKind.TASK_QUEUE_KIND_STICKY, normalName: `${PRESENCE_QUEUE}-normal` },
                identity: this.identity,
              }),
            ),
          );
        } catch (error) {
          if (signal.aborted) return;
          // An expired deadline is the normal end of an empty poll (DEADLINE_EXCEEDED, or CANCELLED from the worker's
          // native connection); anything else is worth a line and a pause.
          const code = (error as { code?: unknown }).code;
          if (code !== 4 && code !== 1) {
            this.onError(error);
            await new Promise((resolve) => setTimeout(resolve, 1000).unref());
          }
        }
        if (Date.now() - startedAt < 200) await new Promise((resolve) => setTimeout(resolve, 200).unref());
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

  /** Who polled the presence queue and when, at most a second old. */
  read(): Promise<PresenceTable> {
    const now = Date.now();
    if (this.table && now - this.table.at < TABLE_TTL_MS) return this.table.value;
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
export function isLost(table: PresenceTable, identity: string, startedAt: number | undefined, lostAfterMs: number): boolean {
  const other = table.lastPoll.get(identity);
  if (table.self === undefined || other === undefined) return false;
  if (table.self - other <= lostAfterMs) return false;
  return startedAt === undefined || table.self - startedAt > lostAfterMs;
}
