import type { AnthropicPromptCache } from './anthropic-prompt-cache';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { anthropicBatches } from './anthropic-batch-api';
import type { BatchApiRoute } from './batch-api';
import { openAiBatches, openAiFiles } from './openai-batch-api';
import type { ProviderBatchSimConfig } from './provider-batch-config';
import { ProviderBatchStore, type ProviderBatchStats } from './provider-batch-store';
import { roll } from './seeded-roll';

export { providerBatchSimSchema, type ProviderBatchSimConfig } from './provider-batch-config';
export type { ProviderBatchStats } from './provider-batch-store';

const FLEX_MARKER = /\[sim(?:\s+[a-z-]+=[^\s\]]+)*\s+flex-busy=(\d+)(?:\s+[a-z-]+=[^\s\]]+)*\s*\]/;

/** Each batch API's route, by the path it answers at and below. */
const ROUTES: readonly { prefix: string; route: BatchApiRoute }[] = [
  { prefix: '/v1/files', route: openAiFiles },
  { prefix: '/v1/batches', route: openAiBatches },
  { prefix: '/v1/messages/batches', route: anthropicBatches },
];

export interface ProviderBatchesSimulator {
  /**
   * For a chat completion: true when it asked for the flex tier and flex capacity is "short" for it (marker or rate);
   * the simulator then answers 429 resource_unavailable. Counts flex requests per task.
   */
  flexRefused(body: { service_tier?: unknown }, taskId: string, prompt: string): boolean;
  /** Answers the request when its path is one of the batch APIs; false otherwise. */
  handle(request: IncomingMessage, response: ServerResponse, path: string): Promise<boolean>;
  stats(): ProviderBatchStats;
  reset(): void;
}

/** The batch APIs' state, kept for the simulator's lifetime. `config` is read on each request (it may be replaced). */
export function createProviderBatches(options: {
  config: () => ProviderBatchSimConfig;
  seed: () => string | number;
  promptCache?: () => { cache: AnthropicPromptCache; minimumTokens: (model: string) => number };
  /** How long a cached prompt prefix lives unused, ms (OpenAI batches cache prefixes as sync calls do). */
  cacheIdleMs: () => number;
}): ProviderBatchesSimulator {
  const store = new ProviderBatchStore(options);
  let flexRequests = new Map<string, number>();

  return {
    flexRefused(body, taskId, prompt) {
      if (body.service_tier !== 'flex') return false;
      const count = (flexRequests.get(taskId) ?? 0) + 1;
      flexRequests.set(taskId, count);
      const marked = FLEX_MARKER.exec(prompt)?.[1];
      if (marked !== undefined) return count <= Number(marked);
      return roll(options.seed(), 'flex', taskId, count) < options.config().flexUnavailableRate;
    },
    async handle(request, response, path) {
      const found = ROUTES.find(({ prefix }) => path === prefix || path.startsWith(`${prefix}/`));
      if (!found) return false;
      const url = new URL(request.url ?? '/', 'http://simulator');
      await found.route({ request, response, path, url, config: options.config(), store });
      return true;
    },
    stats: () => {
      for (const batch of store.batches.values()) store.advance(batch);
      return structuredClone(store.stats);
    },
    reset: () => {
      store.reset();
      flexRequests = new Map();
    },
  };
}
