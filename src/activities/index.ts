import { pricesFromEnvironment, type PriceTable } from '../pricing';
import { PayloadStore, storeFromEnvironment, type ObjectStorage } from '../store';
import { PAID_ANSWER_TRIES, retrying } from '../store/retrying-storage';
import { createModelCallActivities } from './model-call';
import { createBatchActivities } from './batch/batch-activities';
import { createBatchAgentItemActivities } from './batch/agent-item-activities';
import {
  createAnthropicClient,
  createLlmClient,
  defaultModelFromEnvironment,
  type ChatClient,
} from '../llm/llm-client';
import type { MessagesClient } from '../llm/anthropic-messages';
import { createAgentActivities } from './agent';
import { ToolRegistry } from '../tools/registry';
import { createProviderBatchActivities } from './provider-batch/provider-batch-activities';
import type { BatchProvider } from '../contract/provider-batch';
import type { ProviderBatchClient } from '../provider-batch/types';

export interface ActivityDependencies {
  /** OpenAI-compatible client. Default: one built from OPENAI_API_KEY / OPENAI_BASE_URL. */
  llm?: ChatClient;
  /** Anthropic client for `claude-*` models, spoken natively. Default: one built from ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL. */
  anthropic?: MessagesClient;
  /** Model for tasks that name none. Default: FANOUT_MODEL, else gpt-4o-mini. */
  defaultModel?: string;
  /** Clock for durations, ms. Default: performance.now. */
  clock?: () => number;
  /** Heartbeat cadence while a call is in flight, ms (the worker throttles what reaches the server). Default 500. */
  heartbeatIntervalMs?: number;
  /** Where batch sources, sinks and spools are read and written (local paths and s3:// URIs). Default: from the environment. */
  storage?: ObjectStorage;
  /** The claim-check store for large payloads. Default: FANOUT_STORE (see README), else a per-user directory. */
  store?: PayloadStore;
  /** Prices by model for each call's cost. Default: the built-in table with FANOUT_PRICES_FILE and FANOUT_PRICES applied. */
  prices?: PriceTable;
  /** Tools agents may call (functions from defineTool and MCP servers). Default: none but the built-in spawn_agents. */
  tools?: ToolRegistry;
  /** Provider batch API clients (OpenAI, Anthropic). Default: each made from the worker's environment on first use. */
  providerBatches?: Partial<Record<BatchProvider, ProviderBatchClient>>;
  /**
   * Aborted when the worker begins to shut down (`createFanoutWorker` wires it): batch lanes then take no further item,
   * let their open calls finish within the shutdown grace, and hand the rest to another worker. Default: never.
   */
  stopping?: AbortSignal;
}

/**
 * The payload store as activities use it: a write that fails for a moment is tried again for a while, since the
 * activity that fails on it (an agent step, a fan-out call) is retried whole and pays for its model call again.
 */
function paidAnswers(store: PayloadStore): PayloadStore {
  return new PayloadStore(retrying(store.storage, PAID_ANSWER_TRIES), store.root);
}

/**
 * Builds the activity functions a worker registers. The worker passes real dependencies; tests pass their own.
 *
 * @example
 * const worker = await Worker.create({ taskQueue: 'fanout', workflowsPath, activities: createActivities() });
 */
export function createActivities(dependencies: ActivityDependencies = {}) {
  const resolved = {
    llm: dependencies.llm ?? createLlmClient(),
    anthropic: dependencies.anthropic ?? createAnthropicClient(),
    defaultModel: dependencies.defaultModel ?? defaultModelFromEnvironment(),
    clock: dependencies.clock ?? (() => performance.now()),
    heartbeatIntervalMs: dependencies.heartbeatIntervalMs ?? 500,
    storage: dependencies.storage ?? dependencies.store?.storage ?? storeFromEnvironment().storage,
    store: paidAnswers(dependencies.store ?? storeFromEnvironment().store),
    prices: dependencies.prices ?? pricesFromEnvironment(),
    ...(dependencies.stopping ? { stopping: dependencies.stopping } : {}),
  };
  return {
    ...createModelCallActivities(resolved),
    ...createAgentActivities({ ...resolved, tools: dependencies.tools ?? new ToolRegistry() }),
    ...createBatchActivities(resolved),
    ...createBatchAgentItemActivities(resolved),
    ...createProviderBatchActivities({ ...resolved, providerBatches: dependencies.providerBatches }),
  };
}

export type Activities = ReturnType<typeof createActivities>;
