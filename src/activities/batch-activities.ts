import { writeFile } from 'node:fs/promises';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { BatchEntry, BatchResultLine } from '../contract/batch';
import type { TokenUsage } from '../contract/agent-task';
import { FailureType } from '../contract/failure-types';
import { InvalidInputError } from '../contract/validation';
import { appendToSink, fileSize, keepOkLines, okIds, removeSpoolDirectory, removeSpooled, SinkShorterThanExpected, writeSpooled, type FlushItem } from '../batch/result-sink';
import { readEntries, readTaskAt, scanTaskSource } from '../batch/task-source';
import { completeTask, type AgentCallDependencies } from './agent-call';

function invalid(error: InvalidInputError): ApplicationFailure {
  return ApplicationFailure.create({ type: FailureType.InvalidInput, message: error.message, nonRetryable: true, details: [error.issues] });
}

/**
 * Heartbeats every second while `work` runs, so a worker that dies mid-way is noticed within the activity's
 * short heartbeat timeout instead of its start-to-close timeout.
 */
async function heartbeating<T>(work: () => Promise<T>): Promise<T> {
  const context = Context.current();
  context.heartbeat();
  const timer = setInterval(() => context.heartbeat(), 1000);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

async function orInvalid<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof InvalidInputError) throw invalid(error);
    throw error;
  }
}

/** Ok ids a resume skips, read once per worker process and sink prefix. */
const skipSets = new Map<string, Promise<Set<string>>>();
function skipSet(sink: string, belowBytes: number): Promise<Set<string>> | undefined {
  if (belowBytes === 0) return undefined;
  const key = `${sink}\u0000${belowBytes}`;
  let set = skipSets.get(key);
  if (!set) {
    set = okIds(sink, belowBytes);
    skipSets.set(key, set);
  }
  return set;
}

export interface ScanResult {
  total: number;
  alreadyOk: number;
  sinkBytes: number;
  skipOkBelow: number;
}

/** The activities of the `batch` workflow: reading the source in pages, running items, writing the sink. */
export function createBatchActivities(dependencies: AgentCallDependencies) {
  return {
    /** Validates the whole source and prepares the sink (a resume keeps only its ok lines). */
    async scanBatchSource(input: { source: string; sink: string; resume: boolean }): Promise<ScanResult> {
      return heartbeating(() => orInvalid(async () => {
        let skipOkBelow = 0;
        if (input.resume) {
          skipOkBelow = await keepOkLines(input.sink);
        } else if ((await fileSize(input.sink)) > 0) {
          throw new InvalidInputError([{ path: input.sink, message: 'already holds results; resume that batch, or choose another sink' }]);
        } else {
          await writeFile(input.sink, '');
        }
        const skip = await skipSet(input.sink, skipOkBelow);
        const scan = await scanTaskSource(input.source, { skip });
        return { total: scan.toRun, alreadyOk: scan.tasks - scan.toRun, sinkBytes: skipOkBelow, skipOkBelow };
      }));
    },

    async readBatchPage(input: { source: string; sink: string; offset: number; limit: number; skipOkBelow: number }) {
      return heartbeating(() => orInvalid(async () => readEntries(input.source, input.offset, input.limit, await skipSet(input.sink, input.skipOkBelow))));
    },

    /** Runs one item: reads its task from the source, calls the model, spools the result line. Returns counts only. */
    async runBatchItem(input: { source: string; sink: string; entry: BatchEntry }): Promise<{ id: string; attempts: number; durationMs: number; usage?: TokenUsage }> {
      const task = await orInvalid(() => readTaskAt(input.source, input.entry.offset, input.entry.length));
      const startedAt = dependencies.clock();
      const call = await completeTask(task, dependencies);
      const line: BatchResultLine = {
        id: task.id,
        status: 'ok',
        output: call.output,
        attempts: call.attempt,
        durationMs: Math.round(dependencies.clock() - startedAt),
        usage: call.usage,
        model: call.model,
      };
      await writeSpooled(input.sink, line, `${process.pid}-${call.attempt}`);
      return { id: task.id, attempts: call.attempt, durationMs: line.durationMs, usage: call.usage };
    },

    /** Appends results after the acknowledged length of the sink; retries are safe (see result-sink.ts). */
    async flushBatchResults(input: { sink: string; expectedBytes: number; items: FlushItem[]; deleteIds: string[] }): Promise<{ sinkBytes: number }> {
      try {
        return await heartbeating(async () => {
          await removeSpooled(input.sink, input.deleteIds);
          return { sinkBytes: await appendToSink(input.sink, input.expectedBytes, input.items) };
        });
      } catch (error) {
        if (error instanceof SinkShorterThanExpected) throw ApplicationFailure.create({ type: 'SinkChanged', message: error.message, nonRetryable: true });
        throw error;
      }
    },

    async finishBatch(input: { sink: string }): Promise<void> {
      await removeSpoolDirectory(input.sink);
    },
  };
}
