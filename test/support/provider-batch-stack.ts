import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { AnthropicBatches } from '../../src/provider-batch/anthropic-batches';
import { OpenAiBatches } from '../../src/provider-batch/openai-batches';
import type { SimulatorConfigInput } from '../../src/sim/config';
import { Storage } from '../../src/store';
import { useTestStack, type TestServersOptions } from './suite-stack';

/**
 * `useTestStack` whose worker sends provider batches to the simulator's batch APIs: OpenAI's, and Anthropic's unless
 * `providers` leaves it out; with `server`, on a dev server of its own so configured. Both clients have their own retries off, as the worker's are (Temporal retries).
 *
 * @example
 * const suite = useProviderBatchStack({ providerBatches: { speed: 1000 } });
 * it('routes', async () => suite.stack.client.startBatch({ source, sink, options: { route: 'provider-batch' } }));
 */
export function useProviderBatchStack(
  simulator: SimulatorConfigInput,
  providers: readonly ('openai' | 'anthropic')[] = ['openai', 'anthropic'],
  server?: TestServersOptions['server'],
): ReturnType<typeof useTestStack> {
  return useTestStack({
    simulator,
    ...(server ? { server } : {}),
    worker: (servers) => {
      const storage = new Storage();
      const baseURL = servers.simulator.baseUrl;
      const openai = new OpenAiBatches(storage, new OpenAI({ apiKey: 'test-key', baseURL, maxRetries: 0 }));
      if (!providers.includes('anthropic')) return { activities: { storage, providerBatches: { openai } } };
      // Anthropic's SDK adds /v1 itself.
      const anthropic = new AnthropicBatches(
        storage,
        new Anthropic({ apiKey: 'test-key', baseURL: baseURL.replace(/\/v1$/, ''), maxRetries: 0 }),
      );
      return { activities: { storage, providerBatches: { openai, anthropic } } };
    },
  });
}
