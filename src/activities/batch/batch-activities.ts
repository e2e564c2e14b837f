import { CancelledFailure, Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { heartbeating, STORAGE_HEARTBEAT_MS } from '../heartbeating';
import type { BatchEntry, BatchResultLine } from '../../contract/batch';
import { InvalidInputError } from '../../contract/validation';
import { FailureType } from '../../contract/failure-types';
import { inLanes } from '../../contract/in-lanes';
import {
  assembleSink,
  carryOkLines,
  journaled,
  LaneJournal,
  probeWritable,
  removeLeftovers,
  resealed,
  sealedLines,
  sealLane,
  todoFile,
} from '../../spool';
import {
  copyTasks,
  copyTasksWhere,
  parseTaskLine,
  readEntries,
  scanTaskSource,
  SourceChanged,
} from '../../spool/task-source';
import { decodeLine, linesOf } from '../../spool/lines';
import { StripeMarks } from '../../spool/stripes';
import { StorageError, type ObjectStorage } from '../../store';
import { retrying } from '../../store/retrying-storage';
import type { PricingDependencies } from '../../pricing';
import { withCallCost } from '../../answer-cache/call-cost';
import { recordLaneCall } from '../../metrics/activity-interceptor';
import type { ChatDependencies } from '../../llm/send-chat';
import { sendTaskChat } from '../../llm/send-task-chat';
import { watchForCancelRequest } from '../../llm/cancellation';
import { RecentCalls } from '../recent-calls';
import { asFailure, clipped, failureOf, mapped } from './failures';
import type {
  AssembledSink,
  BatchActivities,
  BatchPage,
  HandBack,
  HandBackInput,
  LaneInput,
  LaneLedger,
  LaneResult,
  PageInput,
  ScanInput,
  ScanResult,
} from '../../contract/batch-activities';
import { emptyResult, failedLine, tally, tallyLine } from './lane-result';
import { WindowStops } from './window-stops';
import { batchItemSampled } from '../../telemetry/genai-spans';

/** The page of a resume with nothing left to run. */
const NOTHING_TO_RUN: BatchPage = { entries: [], nextOffset: 0, eof: true };

/**
 * A lane heartbeats every 15 s once it has run that long: with the lane's 45 s heartbeat timeout, Temporal retries a
 * dead worker's lane within a minute even when nothing else notices, and a lane shorter than 15 s sends none.
 */
const LANE_HEARTBEAT_MS = 15_000;

/** The activities of the batch workflows (BatchActivities). */
export function createBatchActivities(
  dependencies: ChatDependencies & PricingDependencies & { storage: ObjectStorage; stopping?: AbortSignal },
): BatchActivities {
  // A store that fails for a moment is tried again call by call: an answer already paid for is never lost to a blip.
  const storage = retrying(dependencies.storage);
  const recentCalls = new RecentCalls(dependencies.clock);
  /** The lanes running on this worker, by window: a window's cancel reaches all of them here at once. */
  const windowStops = new WindowStops();

  /** The lane's items as stored, read in one range and checked to be the ones its page named. */
  async function readLane(input: LaneInput): Promise<Buffer[]> {
    const size = await storage.size(input.file);
    if (size !== input.fileBytes) {
      throw new SourceChanged(
        `the task file ${input.file} changed while the batch ran: it is ${size ?? 'no longer there'} bytes, it was ${input.fileBytes}`,
      );
    }
    const first = input.entries[0];
    const last = input.entries[input.entries.length - 1];
    const range = await storage.readRange(input.file, first.offset, last.offset + last.length - first.offset);
    return input.entries.map((entry) =>
      range.subarray(entry.offset - first.offset, entry.offset - first.offset + entry.length),
    );
  }

  function taskOf(input: LaneInput, entry: BatchEntry, raw: Buffer) {
    const { task } = parseTaskLine(
      raw.length === entry.length ? decodeLine(raw) : undefined,
      `${input.file} at byte ${entry.offset}`,
    );
    if (!task || task.id !== entry.id) {
      throw new SourceChanged(
        `the task file ${input.file} changed while the batch ran: byte ${entry.offset} no longer holds task "${entry.id}"`,
      );
    }
    return task;
  }

  return {
    /**
     * Validates the whole task file and returns its first page. A resume first carries the ok lines of the sink (and of
     * spools stopped runs left) into its own spool, and copies the task lines still to run to `todo.jsonl`, which the
     * batch then runs: no set of ids is kept anywhere while it runs.
     */
    async scanBatchSource(input: ScanInput): Promise<ScanResult> {
      return heartbeating(STORAGE_HEARTBEAT_MS, () =>
        mapped(async () => {
          let file = input.source;
          let alreadyOk = 0;
          if (input.resume) {
            const ok = await carryOkLines(storage, input.sink, input.spool);
            alreadyOk = ok.size;
            await scanTaskSource(storage, input.source);
            file = todoFile(input.spool);
            const toRun = await copyTasks(storage, input.source, file, ok);
            // Everything was answered already (a cancel that landed as the last calls came back): the resume runs
            // nothing and writes the sink from the carried lines.
            if (toRun === 0) return { total: 0, alreadyOk, file, fileBytes: 0, firstPage: NOTHING_TO_RUN };
          } else if (((await storage.size(input.sink)) ?? 0) > 0) {
            throw new InvalidInputError([
              { path: input.sink, message: 'already holds results; resume that batch, or choose another sink' },
            ]);
          } else {
            // A sink that cannot be written fails the batch at once, naming it, before any call is paid for.
            await probeWritable(storage, input.sink).catch((error: unknown) => {
              if (error instanceof StorageError)
                throw new InvalidInputError([{ path: input.sink, message: `cannot be written (${error.message})` }]);
              throw error;
            });
            // Places agents of an earlier batch into this sink left are not this batch's to go on from.
            await storage.removeTree(`${input.sink}.agents`);
          }
          const marks = (input.stripes ?? 1) > 1 ? new StripeMarks() : undefined;
          const scan = await scanTaskSource(storage, file, { marks });
          const fileBytes = (await storage.size(file)) ?? 0;
          const typicalCallMs = recentCalls.typicalMs(scan.firstModel ?? dependencies.defaultModel);
          const stripes = marks?.split(input.stripes ?? 1);
          // The first page is the first stripe's: it stops where the second begins.
          const firstEnd = stripes && stripes.length > 1 ? stripes[1].offset : fileBytes;
          return {
            total: scan.tasks,
            alreadyOk,
            file,
            fileBytes,
            firstPage: await readEntries(storage, file, 0, input.firstPageSize, firstEnd),
            ...(typicalCallMs === undefined ? {} : { typicalCallMs }),
            ...(scan.firstAgentLine === undefined ? {} : { firstAgentLine: scan.firstAgentLine }),
            ...(stripes && stripes.length > 1 ? { stripes } : {}),
          };
        }),
      );
    },

    /** Up to `limit` entries from `offset` on, none at or past `end` (a stripe's end; default the file's scanned size). */
    async readBatchPage(input: PageInput): Promise<BatchPage> {
      return heartbeating(STORAGE_HEARTBEAT_MS, () =>
        mapped(() => readEntries(storage, input.file, input.offset, input.limit, input.end ?? input.fileBytes)),
      );
    },

    /**
     * Runs a lane: its items one after another (`parallel` at once), each answer journaled in the spool before the next
     * call, so a retried attempt (a lost or killed worker) calls only what has no answer yet. Whatever ends it, the lane
     * first aborts the calls it still has open. Cancelled (the batch cancelled, failed fast, or out of budget), it
     * writes what it has and returns, so those answers reach the sink and the cost. A retryable failure of one item in a
     * lane of several goes back to the workflow, which runs the item again as a lane of its own; a lane of one item
     * throws it, so Temporal's retry policy (and the provider's Retry-After) decides.
     */
    async runBatchLane(input: LaneInput): Promise<LaneResult> {
      const context = Context.current();
      const result = emptyResult();
      // Only a retried attempt can find its lane sealed or journaled: the first one saves the look.
      const retried = context.info.attempt > 1;
      const found = retried ? await mapped(() => sealedLines(storage, input.spool, input.lane)) : undefined;
      const sealed = found && (await mapped(() => resealed(storage, input.spool, input.lane, found)));
      if (sealed) {
        // An earlier attempt sealed the lane and its completion was lost: report what it wrote (with what the journal
        // got after the seal, from an attempt that overlapped it: `resealed`). Its items without a line
        // were queued by it to run again (or left unrun by a stop, and a stopped window runs no retry): they go back to
        // the window as retries, or they would end in neither the sink nor a later lane.
        for (const text of sealed) tally(result, text);
        const answered = new Set(sealed.map((text) => (JSON.parse(text) as { id: string }).id));
        const attempts = (input.priorAttempts ?? 0) + context.info.attempt - 1;
        for (const entry of input.entries) if (!answered.has(entry.id)) result.retry.push({ entry, attempts });
        return result;
      }
      const done = retried
        ? await mapped(() => journaled(storage, input.spool, input.lane))
        : new Map<number, string>();
      for (const text of done.values()) tally(result, text);
      const raws = await mapped(() => readLane(input));
      const journal = await mapped(() => LaneJournal.open(storage, input.spool, input.lane));
      /** What this attempt journaled, so sealing does not read it back. */
      const written = new Map<number, string>(done);
      const lane = new AbortController();
      // The window cancelled its lanes (a cancel, a fail-fast, a budget): whichever hears of it first here, this lane's
      // heartbeat answer or the watchdog's look at the run, stops every lane of the window on this worker at once.
      const execution = context.info.workflowExecution;
      const window = execution
        ? WindowStops.key(execution.workflowId, execution.runId)
        : WindowStops.key(context.info.activityId, `${context.info.attempt}`);
      let cancelRequested = false;
      const leave = windowStops.join(window, () => {
        cancelRequested = true;
        lane.abort(new CancelledFailure('the batch window cancelled its lanes'));
      });
      const stopWatching = watchForCancelRequest(() => windowStops.stop(window), context);
      const onCancel = () => {
        if (context.cancellationDetails?.cancelRequested) windowStops.stop(window);
        lane.abort(context.cancellationSignal.reason);
      };
      context.cancellationSignal.addEventListener('abort', onCancel, { once: true });
      const stoppedByRun = () => cancelRequested || context.cancellationDetails?.cancelRequested === true;
      const attempts = (input.priorAttempts ?? 0) + context.info.attempt;
      const single = input.entries.length === 1;
      let fatal: unknown;
      let failedFast = false;
      const runOne = async (index: number): Promise<void> => {
        const entry = input.entries[index];
        const task = taskOf(input, entry, raws[index]);
        const startedAt = dependencies.clock();
        let line: BatchResultLine;
        try {
          const call = withCallCost(
            await sendTaskChat(task, dependencies, {
              ...input.call,
              attemptMs: input.itemAttemptMs,
              attempt: attempts,
              signal: lane.signal,
              runId: input.batchId,
              traced: batchItemSampled(task.id),
            }),
            dependencies.prices,
          );
          const durationMs = Math.round(dependencies.clock() - startedAt);
          line = {
            id: task.id,
            status: 'ok',
            output: call.output ?? '',
            attempts,
            durationMs,
            usage: call.usage,
            ...(call.unpriced ? { unpriced: true } : { costUsd: call.costUsd }),
            ...(call.cached ? { cached: true } : {}),
            ...(call.savedUsd === undefined ? {} : { savedUsd: call.savedUsd }),
            ...(call.cacheSavingsUsd === undefined ? {} : { cacheSavingsUsd: call.cacheSavingsUsd }),
            model: call.model,
          };
          recentCalls.record(task.model ?? dependencies.defaultModel, durationMs);
          recordLaneCall({
            model: call.model,
            status: 'ok',
            attempt: attempts,
            seconds: durationMs / 1000,
            ...(call.usage ? { usage: call.usage } : {}),
            ...(call.unpriced ? { unpriced: true } : { costUsd: call.costUsd }),
            ...(call.cacheSavingsUsd === undefined ? {} : { cacheSavingsUsd: call.cacheSavingsUsd }),
          });
          result.callMsTotal += durationMs;
          result.calls += 1;
          if (call.pacing) result.pacing = call.pacing;
        } catch (error) {
          if (lane.signal.aborted) throw error;
          const failure = failureOf(error);
          // This worker is cut off from Temporal, which retries the lane elsewhere: its next items would each be sent
          // only to be aborted a second later, and sent again by the retry. The lane ends here, its other calls first.
          if (failure.type === FailureType.WorkerLost) throw error;
          const retrying = failure.retryable && attempts < input.maximumAttempts;
          recordLaneCall({
            model: task.model ?? dependencies.defaultModel,
            status: retrying ? 'retrying' : 'failed',
            failureType: failure.type,
            attempt: attempts,
            seconds: (dependencies.clock() - startedAt) / 1000,
          });
          if (retrying) {
            if (single) throw error;
            result.retry.push({ entry, attempts });
            return;
          }
          line = failedLine(entry.id, failure, attempts, Math.round(dependencies.clock() - startedAt));
        }
        const text = JSON.stringify(line);
        // The answer is durable before the lane takes its next item: a crash from here on cannot cost this call again.
        await mapped(() => journal.record(index, text));
        written.set(index, text);
        tallyLine(result, line);
        // Fail-fast: the window hears of a failure when the lane returns, so the lane returns now (its open calls end).
        if (line.status === 'failed' && input.stopAtFailure) failedFast = true;
      };
      // `parallel` calls at once over the items (those an earlier attempt answered skipped); none is taken once the lane
      // is ending.
      let next = 0;
      const take = (): number | undefined => {
        while (
          fatal === undefined &&
          !failedFast &&
          !lane.signal.aborted &&
          !dependencies.stopping?.aborted &&
          next < input.entries.length
        ) {
          const index = next++;
          if (!done.has(index)) return index;
        }
        return undefined;
      };
      const call = async (index: number): Promise<void> => {
        try {
          await runOne(index);
        } catch (error) {
          fatal ??= error;
          // Whatever ends the lane ends its other calls first: nothing it started outlives it.
          lane.abort(error);
        }
      };
      // Every 15 s, or 40% of a shorter heartbeat timeout the run asked for: a lane that heartbeats less often than its
      // timeout is retried while it still runs, and two attempts would call the same items side by side. The answer to a
      // heartbeat also tells a stale attempt (one Temporal gave up on) to stop.
      const heartbeatEvery = Math.min(
        LANE_HEARTBEAT_MS,
        Math.max(100, (context.info.heartbeatTimeoutMs ?? LANE_HEARTBEAT_MS * 3) * 0.4),
      );
      const heartbeat = setInterval(() => context.heartbeat(), heartbeatEvery);
      try {
        await inLanes(Math.max(1, Math.min(input.parallel, input.entries.length)), take, call);
      } finally {
        clearInterval(heartbeat);
        stopWatching();
        leave();
        context.cancellationSignal.removeEventListener('abort', onCancel);
        lane.abort(new Error('lane ended'));
        await journal.close();
      }
      if (context.cancellationSignal.aborted && !context.cancellationDetails?.cancelRequested) {
        // Timed out, lost or shut down: not sealed, so the next attempt carries on from the journal.
        throw context.cancellationSignal.reason;
      }
      if (fatal !== undefined && !context.cancellationSignal.aborted && !stoppedByRun()) throw asFailure(fatal);
      // The worker began to shut down: the lane took nothing after that and its open calls have ended; what it never
      // took goes on from its journal on another worker, so no call is started here only to be cut at the grace's end.
      const untaken = input.entries.findIndex((_, index) => index >= next && !done.has(index));
      if (untaken >= 0 && dependencies.stopping?.aborted && !stoppedByRun() && !failedFast)
        throw ApplicationFailure.create({
          type: FailureType.WorkerStopping,
          message: `worker shutting down: lane ${input.lane} goes on elsewhere from item ${untaken + 1} of ${input.entries.length}`,
        });
      result.notRun = input.entries.length - result.succeeded - result.failed - result.retry.length;
      // Sealed with everything journaled by any attempt; the tally above is this lane's answer either way.
      await mapped(() => sealLane(storage, input.spool, input.lane, [], written, input.entries.length));
      return result;
    },

    /** The items a provider batch handed back to be sent sync (its retry file), as entries of the file the batch runs. */
    async readRetryEntries(input: { uri: string }): Promise<BatchEntry[]> {
      return heartbeating(STORAGE_HEARTBEAT_MS, () =>
        mapped(async () => {
          const entries: BatchEntry[] = [];
          for (const line of (await storage.read(input.uri)).toString('utf8').split('\n')) {
            if (line.trim() === '') continue;
            const { id, offset, length } = JSON.parse(line) as BatchEntry;
            entries.push({ id, offset, length });
          }
          return entries;
        }),
      );
    },

    /** The items a provider batch handed back, copied from the batch's file into a task file of their own. */
    async handBackTasks(input: HandBackInput): Promise<HandBack> {
      return heartbeating(STORAGE_HEARTBEAT_MS, () =>
        mapped(async () => {
          const ids = new Set<string>();
          for await (const line of linesOf(storage, input.retry))
            if (line.text !== undefined && line.text.trim() !== '') ids.add((JSON.parse(line.text) as BatchEntry).id);
          const total = await copyTasksWhere(storage, input.source, input.file, (id) => ids.has(id));
          const fileBytes = (await storage.size(input.file)) ?? 0;
          const firstPage = await readEntries(storage, input.file, 0, input.firstPageSize, fileBytes);
          return { total, file: input.file, fileBytes, firstPage };
        }),
      );
    },

    /**
     * Closes a lane that ended without sealing itself (its attempts spent, or a lane of one item that failed): writes
     * its segment from its journal, with `failure` as the line of every item that has no answer there.
     */
    async sealBatchLane(input: {
      spool: string;
      lane: string;
      entries: BatchEntry[];
      failure: { type: string; message: string };
      attempts: number;
    }): Promise<LaneResult> {
      return heartbeating(STORAGE_HEARTBEAT_MS, () =>
        mapped(async () => {
          const done = await journaled(storage, input.spool, input.lane);
          const failure = { type: input.failure.type, message: clipped(input.failure.message) };
          const extra = input.entries
            .filter((_, index) => !done.has(index))
            .map((entry) => JSON.stringify(failedLine(entry.id, failure, input.attempts, 0)));
          const result = emptyResult();
          for (const text of await sealLane(storage, input.spool, input.lane, extra)) tally(result, text);
          return result;
        }),
      );
    },

    /**
     * Writes the sink from the spool and counts what it holds (finished, cancelled and failed batches alike); a resume's
     * sink replaces the one it resumed, whose stopped runs' spools then go.
     */
    async finishBatch(input: {
      sink: string;
      spool: string;
      ledger: LaneLedger;
      extra?: string[];
      resumed: boolean;
    }): Promise<AssembledSink> {
      return heartbeating(STORAGE_HEARTBEAT_MS, () =>
        mapped(async () => {
          const assembled = await assembleSink(storage, input.sink, input.spool, input.ledger, input.extra);
          if (input.resumed)
            await removeLeftovers(storage, input.sink, input.spool.slice(`${input.sink}.parts/`.length));
          // Agents' places go as their lines are ok; their directory goes when none is left (every agent has ended).
          const places = `${input.sink}.agents`;
          if ((await storage.list(places)).length === 0) await storage.removeTree(places);
          return assembled;
        }),
      );
    },
  };
}
