import { z } from 'zod';
import { MAX_TASK_ID_LENGTH } from './limits';
import { payloadRefSchema, type PayloadRef } from './payload-ref';
import { answerCacheSchema } from './answer-cache';
import type { TokenUsage } from './token-usage';

/** Which API a model call speaks: OpenAI's Chat Completions (or an OpenAI-compatible server), or Anthropic's Messages. */
export const modelProviderSchema = z.enum(['openai', 'anthropic']);
export type ModelProvider = z.infer<typeof modelProviderSchema>;

/**
 * Anthropic's prompt cache: breakpoints written to live 5 minutes or 1 hour (a write costs 1.25x or 2x the input
 * price, a read 0.1x), or none. OpenAI caches prefixes without being asked, so it reads no such option.
 */
export const promptCacheSchema = z.enum(['5m', '1h', 'off']);
export type PromptCache = z.infer<typeof promptCacheSchema>;

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
  /**
   * The API the call speaks: `anthropic` sends it to Anthropic's Messages API (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY),
   * `openai` to the OpenAI-compatible endpoint (OPENAI_BASE_URL). Default: the run's, else `anthropic` for `claude-*`
   * models and `openai` for the rest.
   */
  provider: modelProviderSchema.optional(),
  /**
   * Anthropic's prompt cache for this call's prefix (tools, system, the conversation so far): `5m`, `1h` or `off`.
   * Default: the run's (or batch's), else `5m`.
   */
  promptCache: promptCacheSchema.optional(),
  /** Sampling temperature, 0 to 2. */
  temperature: z.number().min(0).max(2).optional(),
  /** Most tokens the completion may produce. */
  maxTokens: z.number().int().min(1).max(1_000_000).optional(),
  /**
   * OpenAI's `prompt_cache_key`: calls with the same key (and model and prefix) share the provider's prompt cache.
   * Default: a digest of the task's system prompt and tools, so tasks that share them share a cache.
   */
  promptCacheKey: z.string().min(1).max(256).optional(),
  /**
   * Set by the client when the prompt is large: the task's `{ system, prompt }` as JSON in the payload store. `prompt`
   * then holds a short placeholder (what the Temporal UI shows) and the activity reads the real text from the store.
   */
  contentRef: payloadRefSchema.optional(),
  /**
   * Tools the agent may call, by name: functions registered on the worker (`defineTool`), tools of the worker's MCP
   * servers, and the built-in `spawn_agents`. A task with tools (or `output`) runs as a durable loop of model steps
   * and tool calls (the `agent` workflow); without either it is the single call it always was.
   */
  tools: z
    .array(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be a tool name (letters, digits, _ and -, at most 64)'))
    .max(128)
    .optional(),
  /** Most model steps of the agent, repairs of its structured output included. Default 20 (DEFAULT_MAX_STEPS). */
  maxSteps: z.number().int().min(1).max(10_000).optional(),
  /** A JSON schema the final answer must match: the answer is parsed, validated, and sent back with the error when invalid. */
  output: z.record(z.string(), z.unknown()).optional(),
  /** Times an invalid structured answer is sent back to the model before the agent fails. Default 2. */
  outputRepairs: z.number().int().min(0).max(10).optional(),
  /** Tokens this agent may use (every model step counted), sub-agents included. Default: none. */
  tokenBudget: z.number().int().min(1).optional(),
  /** US dollars this agent may spend (every priced model step), sub-agents included. Default: none. */
  costBudgetUsd: z.number().positive().max(1_000_000_000).optional(),
  /**
   * The answer cache of this task's model calls (README, "Answer cache"): set by the client from the run's `cache`
   * option, or on a batch line of its own. Default: none (off).
   */
  cache: answerCacheSchema.optional(),
});

export type AgentTask = z.infer<typeof agentTaskSchema>;

export type AgentStatus = 'ok' | 'failed' | 'cancelled' | 'skipped';

/** One task's outcome, as every workflow reports it. */
export interface AgentResult {
  id: string;
  name: string;
  status: AgentStatus;
  /** The answer. Absent from a workflow's own result when it was large; the client fills it in from `outputRef`. */
  output?: string;
  /** Where the answer is in the payload store when it did not travel inline. */
  outputRef?: PayloadRef;
  error?: { type: string; message: string };
  /** Attempts made (0 when the task never started). */
  attempts: number;
  /** Time from the task's start to its outcome as the workflow saw it, retries included, in ms. */
  durationMs: number;
  usage?: TokenUsage;
  /** US dollars, for an answered call of a priced model (see AgentCallResult). */
  costUsd?: number;
  /** Answered, but its cost is unknown (see AgentCallResult). */
  unpriced?: boolean;
  /** Answered from the answer cache: nothing was sent, it cost $0 (see AgentCallResult). */
  cached?: boolean;
  /** What the cached answer would have cost, US dollars (see AgentCallResult). */
  savedUsd?: number;
  /** What the provider's prompt cache saved on it, US dollars (see AgentCallResult). */
  cacheSavingsUsd?: number;
  model?: string;
  finishReason?: string | null;
  /** For an agent with tools: model steps taken and the transcript in the payload store (`fanout results --json` shows it). */
  steps?: number;
  transcriptRef?: PayloadRef;
}
