import { heartbeating, STORAGE_HEARTBEAT_MS } from '../heartbeating';
import { createHash } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import type { AgentTask } from '../../contract/agent-task';
import { FailureType } from '../../contract/failure-types';
import type { BatchResultLine } from '../../contract/batch';
import { childOf } from '../../contract/location';
import { sealLane } from '../../spool';
import { decodeLine } from '../../spool/lines';
import { parseTaskLine, SourceChanged } from '../../spool/task-source';
import { StorageError, type ObjectStorage, type PayloadStore } from '../../store';
import { retrying } from '../../store/retrying-storage';
import type { AgentBatchItem, SavedPlace } from '../../contract/agent-loop';
import { mapped } from './failures';
import type { BatchAgentItemActivities, LaneResult } from '../../contract/batch-activities';
import { emptyResult, tally } from './lane-result';

/**
 * What a saved place is checked against: a hash of the agent's task less its budgets, so a task whose budget was raised
 * after it stopped goes on from its place, and one whose prompt, tools, model or output changed starts afresh.
 */
export function fingerprintOf(task: AgentTask | undefined): string {
  const { maxSteps: _steps, tokenBudget: _tokens, costBudgetUsd: _usd, ...identity } = task ?? ({} as AgentTask);
  return createHash('sha256').update(JSON.stringify(identity)).digest('hex').slice(0, 32);
}

/** The file in an agent's place (AgentInput.place) that holds what it saved. */
export const PLACE_FILE = 'place.json';

/**
 * The activities of a batch's agents: reading an agent's task and saved place when it starts, saving its place when it
 * ends, and writing its result line into the batch's spool.
 */
export function createBatchAgentItemActivities(dependencies: {
  storage: ObjectStorage;
  store: PayloadStore;
}): BatchAgentItemActivities {
  // As the lanes' storage: a store that fails for a moment is tried again, so a saved place or a line is not lost to it.
  const storage = retrying(dependencies.storage);

  /** The item's task, read from its place in the batch's file and checked to be the one the page named. */
  async function readItem(item: AgentBatchItem): Promise<AgentTask> {
    const size = await storage.size(item.file);
    if (size !== item.fileBytes)
      throw new SourceChanged(
        `the task file ${item.file} changed while the batch ran: it is ${size ?? 'no longer there'} bytes, it was ${item.fileBytes}`,
      );
    const raw = await storage.readRange(item.file, item.offset, item.length);
    const where = `${item.file} at byte ${item.offset}`;
    const { task } = parseTaskLine(raw.length === item.length ? decodeLine(raw) : undefined, where);
    if (!task || task.id !== item.id)
      throw new SourceChanged(
        `the task file ${item.file} changed while the batch ran: byte ${item.offset} no longer holds task "${item.id}"`,
      );
    return task;
  }

  /** What was saved at `uri`, checked to be a place; a place that cannot be read fails the agent, naming the file. */
  async function readPlace(uri: string): Promise<SavedPlace | undefined> {
    let text: string;
    try {
      text = (await storage.read(uri)).toString('utf8');
    } catch (error) {
      if (error instanceof StorageError && error.code === 'NotFound') return undefined;
      throw error;
    }
    let saved: unknown;
    try {
      saved = JSON.parse(text);
    } catch (error) {
      saved = error;
    }
    const isObject = (value: unknown) => typeof value === 'object' && value !== null;
    if (isObject(saved) && (isObject((saved as SavedPlace).state) || isObject((saved as SavedPlace).outcome)))
      return saved as SavedPlace;
    // Never retried: reading it again gives the same bytes. Starting afresh would send answered calls again, so a person
    // decides (the file's agent then starts from its first step).
    throw ApplicationFailure.create({
      type: FailureType.InvalidInput,
      message: `the agent's saved place ${uri} is not a place this agent saved (${saved instanceof Error ? saved.message : 'no state or outcome in it'}); remove it to run the agent from its first step`,
      nonRetryable: true,
    });
  }

  return {
    /**
     * What an agent of a batch starts from: its task (when it is an item), the task's fingerprint (a hash of its line, or
     * of a sub-agent's task), and what it saved in an earlier run, if anything. A place saved for another task (an edited
     * file, an old batch's sink) is removed, with its sub-agents' places, and the agent starts afresh.
     */
    async loadAgentPlace(input: {
      place: string;
      item?: AgentBatchItem;
      task?: AgentTask;
    }): Promise<{ task?: AgentTask; saved?: SavedPlace; fingerprint: string }> {
      return mapped(async () => {
        const task = input.item ? await readItem(input.item) : undefined;
        const fingerprint = fingerprintOf(task ?? input.task);
        let saved = await readPlace(childOf(input.place, PLACE_FILE));
        if (saved && saved.fingerprint !== fingerprint) {
          await storage.removeTree(input.place);
          saved = undefined;
        }
        return { ...(task ? { task } : {}), ...(saved ? { saved } : {}), fingerprint };
      });
    },

    /** Saves an agent's place (flushed: it is what a resume goes on from). */
    async saveAgentPlace(input: { place: string; saved: SavedPlace }): Promise<void> {
      await mapped(() => storage.write(childOf(input.place, PLACE_FILE), JSON.stringify(input.saved)));
    },

    /**
     * Writes an agent item's result line as its lane's segment (an agent is a lane of one item), its answer read in from
     * the payload store when it came by reference. Once the line is ok, the agent's place (and its sub-agents') goes.
     */
    async sealAgentItem(input: {
      spool: string;
      lane: string;
      line: BatchResultLine;
      place?: string;
    }): Promise<LaneResult> {
      return heartbeating(STORAGE_HEARTBEAT_MS, () =>
        mapped(async () => {
          let line = input.line;
          if (line.output === undefined && line.outputRef) {
            const { outputRef, ...rest } = line;
            line = { ...rest, output: await dependencies.store.get(outputRef) };
          }
          const result = emptyResult();
          for (const text of await sealLane(storage, input.spool, input.lane, [JSON.stringify(line)]))
            tally(result, text);
          if (input.place !== undefined && line.status === 'ok') await storage.removeTree(input.place);
          return result;
        }),
      );
    },
  };
}
