import type { AgentStatus, AgentTask } from './agent-task';
import type { PayloadRef } from './payload-ref';

/** A finished dependency of a DAG node, by reference: the activity reads its output from the store. */
export interface DependencyOutput {
  id: string;
  name: string;
  outputRef: PayloadRef;
}

/** One agent's part of a synthesis prompt: its output by reference, or a note saying why there is none. */
export interface SynthesisSection {
  name: string;
  status: AgentStatus;
  outputRef?: PayloadRef;
  output?: string;
  note?: string;
}

/**
 * The input of the `callAgent` activity. Large values arrive as references and the activity resolves them, so a
 * workflow's history never holds dependency outputs or a synthesis's inputs.
 */
export interface AgentCallInput {
  task: AgentTask;
  /** Outputs larger than this many bytes go to the store; the result carries `outputRef` instead of `output`. */
  inlineOutputBytes: number;
  /** Store the output even when small (a later task reads it by reference). */
  storeOutput?: boolean;
  /** Outputs of the DAG dependencies, for `{{deps.<id>}}` templates or an appended context section. */
  dependencies?: DependencyOutput[];
  /** The fanned-out results a synthesis agent combines; the task's prompt holds its instructions. */
  synthesis?: SynthesisSection[];
}
