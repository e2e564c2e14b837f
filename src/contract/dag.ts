import { z } from 'zod';
import { agentTaskSchema, type AgentResult } from './agent-task';
import { MAX_TASKS_PER_FAN_OUT } from './limits';
import type { RunMetrics } from './metrics';
import { runOptionsSchema } from './run-options';
import type { StopReason } from './fan-out';

/** A DAG node: an agent task that starts once every node it depends on has succeeded. */
export const dagNodeSchema = agentTaskSchema.extend({
  /** Ids of the nodes whose outputs this one needs. */
  dependsOn: z.array(z.string().min(1)).optional(),
});
export type DagNode = z.infer<typeof dagNodeSchema>;

/** The one argument of the `dag` workflow. */
export const dagInputSchema = z.strictObject({
  nodes: z.array(dagNodeSchema).min(1, 'must hold at least one node').max(MAX_TASKS_PER_FAN_OUT),
  options: runOptionsSchema.optional(),
});
export type DagInput = z.infer<typeof dagInputSchema>;

export interface CriticalPath {
  /** Node ids from a root to the node that finished last along the longest chain. */
  path: string[];
  /** Sum of the durations along it, ms. */
  lengthMs: number;
}

export interface DagResult {
  /** One result per node, in input order; nodes below a failure are `skipped`, naming the failed ancestor. */
  results: AgentResult[];
  /** Topological levels, as `parallelGroups` computes them. */
  groups: string[][];
  metrics: RunMetrics & { criticalPath: CriticalPath };
  stoppedBy?: StopReason;
}

/** The fan-in agent of a fan-out/fan-in run. */
export const synthesisSchema = z.strictObject({
  id: z.string().min(1).max(200).optional(),
  name: z.string().min(1).max(200).optional(),
  system: z.string().optional(),
  /** Instructions placed before the agents' outputs. */
  prompt: z.string().min(1).optional(),
  model: z.string().min(1).optional(),
  temperature: z.number().min(0).max(2).optional(),
  maxTokens: z.number().int().min(1).optional(),
});
export type Synthesis = z.infer<typeof synthesisSchema>;

/** The one argument of the `fanOutFanIn` workflow. */
export const fanOutFanInInputSchema = z.strictObject({
  tasks: z
    .array(agentTaskSchema)
    .min(1, 'must hold at least one task')
    .max(MAX_TASKS_PER_FAN_OUT - 1),
  synthesis: synthesisSchema.optional(),
  options: runOptionsSchema.optional(),
});
export type FanOutFanInInput = z.infer<typeof fanOutFanInInputSchema>;

export interface FanOutFanInResult {
  results: AgentResult[];
  synthesis: AgentResult;
  metrics: RunMetrics;
  stoppedBy?: StopReason;
}
