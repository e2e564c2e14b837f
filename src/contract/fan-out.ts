import type { PacingStatus } from './pacing';
import { z } from 'zod';
import { agentTaskSchema, type AgentResult } from './agent-task';
import { MAX_TASKS_PER_FAN_OUT } from './limits';
import type { RunCost, RunMetrics } from './metrics';
import { runOptionsSchema } from './run-options';

/** Options of a fan-out: the shared run options. */
export const fanOutOptionsSchema = runOptionsSchema;
export type FanOutOptions = z.infer<typeof fanOutOptionsSchema>;

/** The one argument of the `fanOut` workflow. */
export const fanOutInputSchema = z.strictObject({
  tasks: z
    .array(agentTaskSchema)
    .min(1, 'must hold at least one task')
    .max(
      MAX_TASKS_PER_FAN_OUT,
      `must hold at most ${MAX_TASKS_PER_FAN_OUT} tasks in one fan-out; run a larger list as a batch (fanout batch start)`,
    ),
  options: fanOutOptionsSchema.optional(),
});
export type FanOutInput = z.infer<typeof fanOutInputSchema>;

/** Why a run stopped before every task had its own outcome ('budget': its tokenBudget or costBudgetUsd was reached). */
export type StopReason = 'fail-fast' | 'run-timeout' | 'budget';

/** What `fanOut` returns: one result per task, in input order. */
export interface FanOutResult {
  results: AgentResult[];
  metrics: RunMetrics;
  stoppedBy?: StopReason;
}

export type TaskState = 'pending' | 'running' | 'ok' | 'failed' | 'cancelled' | 'skipped';

/** Answer of the `progress` query. */
export interface RunProgress {
  total: number;
  done: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  skipped: number;
  running: number;
  pending: number;
  /** Spend of the calls answered so far. */
  cost: RunCost;
  /** Of their prompt tokens, those providers served from their prompt caches; absent while there are none. */
  cachedTokens?: number;
  /** The workers' pacing of the run's calls: each worker's concurrency limit per model, and its last moves. */
  pacing?: PacingStatus;
  /** `agentWorkflowId`: the child workflow of a task with tools (its steps, tool calls and approvals). */
  tasks: { id: string; name: string; state: TaskState; attempts: number; agentWorkflowId?: string }[];
}
