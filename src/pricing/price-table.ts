import { z } from 'zod';

/** What one model costs, US dollars per million tokens. */
export const modelPriceSchema = z.strictObject({
  /** Prompt (input) tokens, $ per million. */
  inputPerMillion: z.number().min(0).max(1_000_000),
  /** Completion (output) tokens, $ per million; reasoning tokens are billed as output and counted in them. */
  outputPerMillion: z.number().min(0).max(1_000_000),
  /** Through a provider's batch API (OpenAI Batch, Anthropic Message Batches), $ per million. Default: half the standard price. */
  batchInputPerMillion: z.number().min(0).max(1_000_000).optional(),
  batchOutputPerMillion: z.number().min(0).max(1_000_000).optional(),
  /** OpenAI's `service_tier: "flex"`, $ per million. Default: the batch price (what OpenAI lists for flex). */
  flexInputPerMillion: z.number().min(0).max(1_000_000).optional(),
  flexOutputPerMillion: z.number().min(0).max(1_000_000).optional(),
});

/** Which price a call pays: the standard tier, a provider batch, or OpenAI's flex tier. */
export type PriceTier = 'standard' | 'batch' | 'flex';
export type ModelPrice = z.infer<typeof modelPriceSchema>;

/** Prices by model name, as FANOUT_PRICES and FANOUT_PRICES_FILE hold them: `{ "gpt-4o": { "inputPerMillion": 2.5, ... } }`. */
export const priceTableSchema = z.record(z.string().min(1, 'a model name must not be empty'), modelPriceSchema);
export type PriceTable = Readonly<Record<string, ModelPrice>>;

/** [input, output] list prices by model, $ per million tokens: the data of BUILT_IN_PRICES. */
const LIST_PRICES: Readonly<Record<string, readonly [input: number, output: number]>> = {
  'gpt-4o': [2.5, 10],
  'gpt-4o-mini': [0.15, 0.6],
  'gpt-4.1': [2, 8],
  'gpt-4.1-mini': [0.4, 1.6],
  'gpt-4.1-nano': [0.1, 0.4],
  'gpt-5': [1.25, 10],
  'gpt-5-mini': [0.25, 2],
  'gpt-5-nano': [0.05, 0.4],
  o1: [15, 60],
  'o1-mini': [1.1, 4.4],
  o3: [2, 8],
  'o3-mini': [1.1, 4.4],
  'o4-mini': [1.1, 4.4],
  'gpt-4-turbo': [10, 30],
  'gpt-3.5-turbo': [0.5, 1.5],
  // Anthropic's list prices (claude.com/pricing, 2025); their Message Batches cost half, as OpenAI's Batch API does.
  'claude-opus-4-1': [15, 75],
  'claude-sonnet-4-5': [3, 15],
  'claude-haiku-4-5': [1, 5],
};

/**
 * OpenAI's standard-tier list prices for text tokens, $ per million, as openai.com/api/pricing listed them in 2025 and
 * early 2026. Prices change and discounts do not show here (cached input, the Batch API, flex and priority tiers,
 * negotiated rates): these are a starting point, and FANOUT_PRICES_FILE / FANOUT_PRICES override any entry. A model
 * missing from the table is reported unpriced, never as free.
 */
export const BUILT_IN_PRICES: PriceTable = Object.fromEntries(
  Object.entries(LIST_PRICES).map(([model, [inputPerMillion, outputPerMillion]]) => [
    model,
    { inputPerMillion, outputPerMillion },
  ]),
);

/** What the agent activities need to price their calls. */
export interface PricingDependencies {
  /** Prices by model. Default: pricesFromEnvironment(). */
  prices: PriceTable;
}
