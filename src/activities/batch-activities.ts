import { setMaxListeners } from 'node:events';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { BatchEntry, BatchResultLine } from '../contract/batch';
import type { TokenUsage } from '../contract/agent-task';
import type { PacingReport } from '../contract/pacing';
import { FailureType, NON_RETRYABLE_FAILURE_TYPES } from '../contract/failure-types';
import { segmentName } from '../contract/location';
import { InvalidInputError } from '../contract/validation';
import { assembleSink, carryOkLines, keptSegment, okIds, writeItemLine, writeSegment, type FlushItem } from '../batch/result-sink';
import { readEntries, readTaskAt, scanTaskSource, SourceChanged } from '../batch/task-source';
import { StorageError, type ObjectStorage } from '../store';
import type { PricingDependencies } from '../pricing';
import { withCost } from '../pricing/price-of';
import { completeTask, type AgentCallDependencies } from './agent-call';
import { RecentCalls } from './recent-calls';

function invalid(error: InvalidInputError): ApplicationFailure {
  return ApplicationFailure.create({ type: FailureType.InvalidInput, message: error.message, nonRetryable: true, details: [error.issues] });
}

/**
 * Heartbeats every 3 s while `work` runs, so a worker that dies mid-way is noticed within the activity's short heartbeat
 * timeout (10 s) instead of its start-to-close timeout. The first heartbeat waits those 3 s too: the heartbeat timeout
 * already runs from the start, and most page reads and flushes end sooner, so they cost no heartbeat (a billed action).
 */
async function heartbeating<T>(work: () => Promise<T>): Promise<T> {
  const context = Context.current();
  const timer = setInterval(() => context.heartbeat(), STORAGE_HEARTBEAT_MS);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

const STORAGE_HEARTBEAT_MS = 3000;

/** Maps what batch I/O throws to failures with stable types: bad input and changed files are never retried. */
async function mapped<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof InvalidInputError) throw invalid(error);
    if (error instanceof SourceChanged) throw ApplicationFailure.create({ type: FailureType.SourceChanged, message: error.message, nonRetryable: true });
    if (error instanceof StorageError) {
      throw ApplicationFailure.create({
        type: error.code === 'Unavailable' ? FailureType.StorageUnavailable : FailureType.PayloadUnavailable,
        message: error.message,
        // A missing object or a refused permission is worth a few retries (a store being set up); the policy bounds them.
        nonRetryable: error.code === 'Invalid',
      });
    }
    throw error;
  }
}

/** Ok ids a resume skips, read once per worker process from the resume's segment 0. */
const skipSets = new Map<string, Promise<Set<string>>>();
function skipSet(storage: ObjectStorage, spool: string | undefined): Promise<Set<string>> | undefined {
  if (spool === undefined) return undefined;
  const uri = keptSegment(spool);
  let set = skipSets.get(uri);
  if (!set) {
    set = okIds(storage, uri);
    set.catch(() => skipSets.delete(uri));
    skipSets.set(uri, set);
  }
  return set;
}

export interface ScanResult {
  total: number;
  alreadyOk: number;
  /** The source's first page, when the scan was asked for it (`firstPageSize`): the batch starts without reading it. */
  firstPage?: BatchPage;
  /** How long this worker's recent calls of the first task's model took, ms (RecentCalls), if it made enough lately. */
  typicalCallMs?: number;
}

export interface BatchPage {
  entries: BatchEntry[];
  nextOffset: number;
  eof: boolean;
}

export interface BatchItemResult {
  id: string;
  attempts: number;
  durationMs: number;
  usage?: TokenUsage;
  /** US dollars of the call; absent when `unpriced` (see AgentCallResult). */
  costUsd?: number;
  unpriced?: boolean;
  /** The result line, when small enough to travel inline. */
  line?: BatchResultLine;
  /** Where the result line is stored, when it is large. */
  lineRef?: string;
  /** Bytes of the line in the sink. */
  bytes: number;
  /** The worker's pacing, when it moved or was last reported over 5 s ago (see AgentCallResult). */
  pacing?: PacingReport;
}

/** One item of a chunk: its result, or why it failed (the workflow decides whether it runs again). */
export type BatchChunkItem =
  | { ok: BatchItemResult; failed?: undefined }
  | { ok?: undefined; failed: { id: string; type: string; message: string; retryable: boolean; durationMs: number } };

export interface BatchChunkResult {
  /** In the order of the chunk's entries. */
  items: BatchChunkItem[];
}

/** The activities of the `batch` workflow: reading the source in pages, running items, writing the sink. */
export function createBatchActivities(dependencies: AgentCallDependencies & PricingDependencies & { storage: ObjectStorage }) {
  const { storage } = dependencies;
  const recentCalls = new RecentCalls(dependencies.clock);

  async function runItem(source: string, spool: string, entry: BatchEntry, inlineLineBytes: number, attemptMs?: number): Promise<BatchItemResult> {
    const task = await mapped(() => readTaskAt(storage, source, entry));
    const startedAt = dependencies.clock();
    const call = withCost(await completeTask(task, dependencies, { attemptMs }), dependencies.prices);
    const cost = call.unpriced ? { unpriced: true } : { costUsd: call.costUsd };
    const line: BatchResultLine = {
      id: task.id,
      status: 'ok',
      output: call.output ?? '',
      attempts: call.attempt,
      durationMs: Math.round(dependencies.clock() - startedAt),
      usage: call.usage,
      ...cost,
      model: call.model,
    };
    recentCalls.record(task.model ?? dependencies.defaultModel, line.durationMs);
    const text = JSON.stringify(line);
    const bytes = Buffer.byteLength(text, 'utf8') + 1;
    const summary = { id: task.id, attempts: call.attempt, durationMs: line.durationMs, usage: call.usage, ...cost, bytes, ...(call.pacing ? { pacing: call.pacing } : {}) };
    if (bytes <= inlineLineBytes) return { ...summary, line };
    const lineRef = await mapped(() => writeItemLine(storage, spool, segmentName(task.id), text));
    return { ...summary, lineRef };
  }

  return {
    /**
     * Validates the whole source; a resume first carries the ok lines of the sink (and of any leftover spool) over. Asked
     * for it, returns the first page too (one activity fewer before the first call), and the worker's recent call length.
     */
    async scanBatchSource(input: { source: string; sink: string; spool: string; resume: boolean; firstPageSize?: number }): Promise<ScanResult> {
      return heartbeating(() =>
        mapped(async () => {
          let kept = 0;
          if (input.resume) kept = await carryOkLines(storage, input.sink, input.spool);
          else if (((await storage.size(input.sink)) ?? 0) > 0) {
            throw new InvalidInputError([{ path: input.sink, message: 'already holds results; resume that batch, or choose another sink' }]);
          } else await storage.checkWritable(input.sink);
          const skip = await skipSet(storage, input.resume ? input.spool : undefined);
          const scan = await scanTaskSource(storage, input.source, { skip });
          const typicalCallMs = recentCalls.typicalMs(scan.firstModel ?? dependencies.defaultModel);
          return {
            total: scan.toRun,
            alreadyOk: kept,
            ...(input.firstPageSize === undefined ? {} : { firstPage: await readEntries(storage, input.source, 0, input.firstPageSize, skip) }),
            ...(typicalCallMs === undefined ? {} : { typicalCallMs }),
          };
        }),
      );
    },

    async readBatchPage(input: { source: string; offset: number; limit: number; resumeSpool?: string }): Promise<BatchPage> {
      return heartbeating(() => mapped(async () => readEntries(storage, input.source, input.offset, input.limit, await skipSet(storage, input.resumeSpool))));
    },

    /**
     * Runs one item: reads its task from the source (checking it is still the one the page named), calls the model,
     * and returns the result line, or a reference to it when it is larger than `inlineLineBytes`.
     */
    async runBatchItem(input: { source: string; spool: string; entry: BatchEntry; inlineLineBytes: number }): Promise<BatchItemResult> {
      return runItem(input.source, input.spool, input.entry, input.inlineLineBytes);
    },

    /**
     * Runs several items in one activity, `parallel` at a time, for short calls, where one activity per item would cost
     * more in Temporal round trips than the calls themselves take. Each item's failure comes back as that item's outcome
     * (the workflow runs a retryable one again as its own activity); a changed source, and the chunk's cancellation,
     * end the whole chunk.
     */
    async runBatchChunk(input: {
      source: string;
      spool: string;
      entries: BatchEntry[];
      inlineLineBytes: number;
      parallel?: number;
      /** Each item's own budget (request deadline plus rate-limit wait), ms; by default the chunk's start-to-close. */
      itemAttemptMs?: number;
    }): Promise<BatchChunkResult> {
      const context = Context.current();
      const { cancellationSignal } = context;
      // Each call in flight links two listeners to the activity's signal (its wait budget and its request), and unlinks
      // them when it ends: `parallel` calls at once are expected, not a leak for Node to warn about.
      setMaxListeners(Math.max(10, 3 * (input.parallel ?? input.entries.length)), cancellationSignal);
      const runOne = async (entry: BatchEntry): Promise<BatchChunkItem> => {
        const startedAt = dependencies.clock();
        try {
          return { ok: await runItem(input.source, input.spool, entry, input.inlineLineBytes, input.itemAttemptMs) };
        } catch (error) {
          if (cancellationSignal.aborted) throw error;
          const type = error instanceof ApplicationFailure ? (error.type ?? FailureType.Unknown) : FailureType.Unknown;
          if (type === FailureType.SourceChanged || type === FailureType.SinkChanged) throw error;
          const nonRetryable = (error instanceof ApplicationFailure && error.nonRetryable) || (NON_RETRYABLE_FAILURE_TYPES as readonly string[]).includes(type);
          const message = error instanceof Error ? error.message : String(error);
          return { failed: { id: entry.id, type, message, retryable: !nonRetryable, durationMs: Math.round(dependencies.clock() - startedAt) } };
        }
      };
      // `parallel` calls at once, the next item starting as one ends.
      const items: BatchChunkItem[] = new Array(input.entries.length);
      let next = 0;
      const slot = async (): Promise<void> => {
        while (next < input.entries.length && !cancellationSignal.aborted) {
          const index = next++;
          items[index] = await runOne(input.entries[index]);
        }
      };
      // A run with a heartbeat timeout hears from the whole chunk on a timer: its calls heartbeat only while one is in flight
      // long enough, and a chunk of many short ones (and their reads between) outlasts the timeout without a word.
      const heartbeatTimeoutMs = context.info.heartbeatTimeoutMs ?? 0;
      const timer = heartbeatTimeoutMs > 0 ? setInterval(() => context.heartbeat(), heartbeatTimeoutMs * 0.4) : undefined;
      try {
        await Promise.all(Array.from({ length: Math.max(1, Math.min(input.parallel ?? input.entries.length, input.entries.length)) }, slot));
      } finally {
        clearInterval(timer);
      }
      if (cancellationSignal.aborted) throw cancellationSignal.reason;
      return { items };
    },

    /** Writes one numbered segment of results; repeating it (a retry, or a stale attempt) writes the same segment. */
    async flushBatchResults(input: { spool: string; sequence: number; items: FlushItem[] }): Promise<{ bytes: number }> {
      return heartbeating(() => mapped(async () => ({ bytes: await writeSegment(storage, input.spool, input.sequence, input.items) })));
    },

    /** Concatenates the segments into the sink and removes the spool (finished, cancelled and failed batches alike). */
    async finishBatch(input: { sink: string; spool: string; segments: number }): Promise<{ sinkBytes: number }> {
      return heartbeating(() => mapped(async () => ({ sinkBytes: await assembleSink(storage, input.sink, input.spool, input.segments) })));
    },
  };
}
