import type { WorkflowHandle } from '@temporalio/client';
import type { Workflow, WorkflowResultType } from '@temporalio/common';
import type { RunProgress } from '../contract/fan-out';
import type { RunEventPage } from '../contract/events';
import type { PayloadStore } from '../store';
import { eventsQuery, progressQuery } from '../workflows/messages';
import { resolveRunResult } from './payloads';

/** A run's workflow type and state, from a describe (free on Temporal Cloud, unlike a query). */
export interface RunDescription {
  /** The workflow type: `fanOut`, `dag`, `fanOutFanIn` or `batch`. */
  type: string;
  /** The execution status by name: `RUNNING`, `COMPLETED`, `FAILED`, `CANCELLED`, `TERMINATED`, ... */
  status: string;
  /** The current run (it changes on continue-as-new). */
  runId: string;
  /** Events in the current run's history: it grows whenever anything happens in the run. */
  historyLength: number;
}

/** A started run (fan-out, DAG, fan-out/fan-in) whose result is `R`. */
export interface RunHandle<R> {
  readonly workflowId: string;
  readonly runId: string | undefined;
  /** Counts and per-task states, live. */
  progress(): Promise<RunProgress>;
  /** The run's event log after `cursor` (start at 0; pass back `nextCursor`). A closed run still answers. */
  events(cursor: number): Promise<RunEventPage>;
  /** The run's type and state. */
  describe(): Promise<RunDescription>;
  /** Requests cancellation; the run cancels every agent it started and waits for them to stop. */
  cancel(): Promise<void>;
  /** Waits for the outcome: every result in input order (outputs read back from the store), and the run's metrics. */
  result(): Promise<R>;
  /** The underlying Temporal handle, for anything else. */
  readonly workflow: WorkflowHandle;
}

/** A `RunHandle` on a Temporal handle; `result()` reads the outputs offloaded to `store` back. */
export function toHandle<W extends Workflow>(
  workflow: WorkflowHandle<W>,
  store: PayloadStore,
  runId?: string,
): RunHandle<WorkflowResultType<W>> {
  return {
    workflowId: workflow.workflowId,
    runId,
    workflow,
    progress: () => workflow.query(progressQuery),
    events: (cursor) => workflow.query(eventsQuery, cursor),
    describe: async () => {
      const description = await workflow.describe();
      return {
        type: description.type,
        status: description.status.name,
        runId: description.runId,
        historyLength: description.historyLength,
      };
    },
    cancel: () => workflow.cancel().then(() => undefined),
    result: async () => resolveRunResult(await workflow.result(), store),
  };
}
