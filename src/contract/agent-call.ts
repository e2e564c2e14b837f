import type { AgentStatus, AgentTask } from './agent-task';
import type { TokenUsage } from './token-usage';
import type { PacingReport } from './pacing';
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

/** What one successful agent activity returns. */
export interface AgentCallResult {
  /** The answer, when it is small enough to travel inline. */
  output?: string;
  /** The answer in the payload store, when it is large (or a later task reads it). */
  outputRef?: PayloadRef;
  finishReason: string | null;
  model: string;
  usage?: TokenUsage;
  /** Temporal's attempt number of the call that succeeded (1 on the first try). */
  attempt: number;
  /** Duration of the successful HTTP call, in ms. */
  durationMs: number;
  /** What the call cost in US dollars, from the worker's price table (src/pricing). Absent when `unpriced`. */
  costUsd?: number;
  /** True when the cost is unknown: the model has no price on the worker (or the provider reported no usage). Never $0. */
  unpriced?: boolean;
  /** Answered from the answer cache (or an identical request in flight on the worker): nothing was sent, `costUsd` is 0. */
  cached?: boolean;
  /** For a cached answer: what the provider billed for it when it was answered, US dollars (from its usage then). */
  savedUsd?: number;
  /**
   * What the provider's prompt cache saved on the call against its prompt billed uncached, US dollars (`costUsd` is
   * already net of it); present when the provider reported cache tokens and the model has a price.
   */
  cacheSavingsUsd?: number;
  /** The tier the provider says served the call (`flex`, `default` ...), when it said; a flex call is priced at flex prices. */
  serviceTier?: string;
  /** The worker's pacing for the call's provider + model, when it moved or was last reported over 5 s ago. */
  pacing?: PacingReport;
  /** An agent with tools: the model steps it took and its transcript in the payload store. */
  steps?: number;
  transcriptRef?: PayloadRef;
}

/**
 * The activity of the fan-out and DAG workflows: one model call (a chat completion) for one task. Its registered name,
 * `callAgent`, is kept from before it was named for what it does: histories hold it.
 */
export interface ModelCallActivities {
  /** A bare task is the input of histories from before the payload store. */
  callAgent(request: AgentCallInput | AgentTask): Promise<AgentCallResult>;
}
