import type { WorkflowToolName, WorkflowToolTypes } from '../contract/agent-loop';
import type { AgentTask } from '../contract/agent-task';
import type { PayloadRef } from '../contract/payload-ref';

/** What a workflow tool's `prepare` has besides the model's arguments: where the call is, and the run's store. */
export interface ToolPrepareContext {
  /** The calling agent's task. */
  task: AgentTask;
  /** The step (from 1) and the call's place among the step's calls (from 0). */
  step: number;
  index: number;
  /** Stores a large input (a sub-agent's prompt) among the run's inputs; a store that fails fails the step (retried). */
  storeInput(name: string, content: string, what: string): Promise<PayloadRef>;
}

/** What a workflow tool's `report` has: reads of the run's store. */
export interface ToolReportContext {
  /** A stored payload's text (a sub-agent's answer); a store that fails fails the call (retried). */
  read(ref: PayloadRef, what: string): Promise<string>;
}

/**
 * A built-in tool the agent workflow runs itself, because running it starts child workflows, which only workflow code
 * can (`spawn_agents`). It is in the registry, offered and its arguments validated like any tool; then the `agentStep`
 * activity turns the model's arguments into the workflow's input (`prepare`), the workflow runs the call
 * (src/workflows/agent/tool-calls.ts), and the `toolCall` activity makes what it returned the text the model reads
 * (`report`), stored as any tool's result is.
 */
export interface WorkflowTool<Name extends WorkflowToolName = WorkflowToolName> {
  readonly runner: 'workflow';
  readonly name: Name;
  readonly description: string;
  /** JSON schema of the input, as the provider wants it in `tools[].function.parameters`. */
  readonly parameters: Record<string, unknown>;
  /** The workflow's input from the model's arguments (parsed JSON). Throws ToolInputError, for the model, when they do not fit. */
  prepare(input: unknown, context: ToolPrepareContext): Promise<WorkflowToolTypes[Name]['input']>;
  /** The text the model reads of what the workflow's run returned, and whether the call succeeded. */
  report(result: WorkflowToolTypes[Name]['result'], context: ToolReportContext): Promise<{ text: string; ok: boolean }>;
}
