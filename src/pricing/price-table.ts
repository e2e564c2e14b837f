import { z } from 'zod';
// [input, output] list prices by model, $ per million tokens: the data of BUILT_IN_PRICES. Anthropic's are from
// claude.com/pricing (2025); their Message Batches cost half, as OpenAI's Batch API does.
import LIST_PRICES from './list-prices.json';

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

/** The list prices file: [input, output] by model. */
const listPricesSchema = z.record(z.string(), z.tuple([z.number().min(0), z.number().min(0)]));

/**
 * OpenAI's standard-tier list prices for text tokens, $ per million, as openai.com/api/pricing listed them in 2025 and
 * early 2026. Prices change and discounts do not show here (cached input, the Batch API, flex and priority tiers,
 * negotiated rates): these are a starting point, and FANOUT_PRICES_FILE / FANOUT_PRICES override any entry. A model
 * missing from the table is reported unpriced, never as free.
 */
export const BUILT_IN_PRICES: PriceTable = Object.fromEntries(
  Object.entries(listPricesSchema.parse(LIST_PRICES)).map(([model, [inputPerMillion, outputPerMillion]]) => [
    model,
    { inputPerMillion, outputPerMillion },
  ]),
);

/** What the agent activities need to price their calls. */
export interface PricingDependencies {
  /** Prices by model. Default: pricesFromEnvironment(). */
  prices: PriceTable;
}
