import { z } from 'zod';
import { MAX_TASK_ID_LENGTH } from './limits';

/** One agent call: a chat completion with an optional system prompt. */
export const agentTaskSchema = z.strictObject({
  /** Unique within a run; results and sink lines are keyed by it. */
  id: z
    .string()
    .min(1, 'must not be empty')
    .max(MAX_TASK_ID_LENGTH, `must be at most ${MAX_TASK_ID_LENGTH} characters`)
    .regex(/^[A-Za-z0-9._:@/-]+$/, 'may only contain letters, digits and . _ : @ / -'),
  /** Display name (the activity summary in the Temporal UI). Default: the id. */
  name: z.string().min(1).max(200).optional(),
  /** System prompt. */
  system: z.string().optional(),
  /** User prompt. */
  prompt: z.string().min(1, 'must not be empty'),
  /** Model name. Default: the worker's FANOUT_MODEL. */
  model: z.string().min(1).optional(),
  /** Sampling temperature, 0 to 2. */
  temperature: z.number().min(0).max(2).optional(),
  /** Most tokens the completion may produce. */
  maxTokens: z.number().int().min(1).max(1_000_000).optional(),
});

export type AgentTask = z.infer<typeof agentTaskSchema>;

/** Token counts reported by the provider. */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

/** What one successful agent activity returns. */
export interface AgentCallResult {
  output: string;
  finishReason: string | null;
  model: string;
  usage?: TokenUsage;
  /** Temporal's attempt number of the call that succeeded (1 on the first try). */
  attempt: number;
  /** Duration of the successful HTTP call, in ms. */
  durationMs: number;
}

export type AgentStatus = 'ok' | 'failed' | 'cancelled' | 'skipped';

/** One task's outcome, as every workflow reports it. */
export interface AgentResult {
  id: string;
  name: string;
  status: AgentStatus;
  output?: string;
  error?: { type: string; message: string };
  /** Attempts made (0 when the task never started). */
  attempts: number;
  /** Time from the task's start to its outcome as the workflow saw it, retries included, in ms. */
  durationMs: number;
  usage?: TokenUsage;
  model?: string;
  finishReason?: string | null;
}
