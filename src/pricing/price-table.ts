import { z } from 'zod';
// List prices by model, $ per million tokens: the data of BUILT_IN_PRICES. OpenAI's are [input, output, cached input]
// (no third figure: the model has no cached price, so its cached tokens are billed as input); Anthropic's are
// [input, output], their cache prices following from ANTHROPIC_CACHE_RATIOS. Both batch APIs cost half.
import LIST_PRICES from './list-prices.json';

const perMillion = z.number().min(0).max(1_000_000);

const modelPriceFields = z.strictObject({
  /** Prompt (input) tokens, $ per million. */
  inputPerMillion: perMillion,
  /** Completion (output) tokens, $ per million; reasoning tokens are billed as output and counted in them. */
  outputPerMillion: perMillion,
  /**
   * Prompt tokens read from the provider's prompt cache (OpenAI's "cached input", Anthropic's cache reads), $ per
   * million, at most `inputPerMillion`. Default: Anthropic's ratio for a `claude-*` model, else the input price (no
   * discount: a model without a listed cached price is never billed less than its input price).
   */
  cachedInputPerMillion: perMillion.optional(),
  /** Prompt tokens written to Anthropic's cache for 5 minutes, $ per million. Default: 1.25x input for `claude-*`, else input. */
  cacheWrite5mPerMillion: perMillion.optional(),
  /** Prompt tokens written to Anthropic's cache for 1 hour, $ per million. Default: 2x input for `claude-*`, else input. */
  cacheWrite1hPerMillion: perMillion.optional(),
  /** Through a provider's batch API (OpenAI Batch, Anthropic Message Batches), $ per million. Default: half the standard price. */
  batchInputPerMillion: perMillion.optional(),
  batchOutputPerMillion: perMillion.optional(),
  /** OpenAI's `service_tier: "flex"`, $ per million. Default: the batch price (what OpenAI lists for flex). */
  flexInputPerMillion: perMillion.optional(),
  flexOutputPerMillion: perMillion.optional(),
});

/**
 * What one model costs, US dollars per million tokens. A tier's discount (batch, flex) applies to the cache prices
 * too, in the ratio of the tier's input price to the standard one, as both providers bill it.
 */
export const modelPriceSchema = modelPriceFields.superRefine((price, context) => {
  if (price.cachedInputPerMillion !== undefined && price.cachedInputPerMillion > price.inputPerMillion)
    context.addIssue({
      code: 'custom',
      path: ['cachedInputPerMillion'],
      message: `${price.cachedInputPerMillion} exceeds inputPerMillion (${price.inputPerMillion}): a cached token is never billed above an uncached one`,
    });
});

/** Which price a call pays: the standard tier, a provider batch, or OpenAI's flex tier. */
export type PriceTier = 'standard' | 'batch' | 'flex';
export type ModelPrice = z.infer<typeof modelPriceSchema>;

/** Prices by model name, as FANOUT_PRICES and FANOUT_PRICES_FILE hold them: `{ "gpt-4o": { "inputPerMillion": 2.5, ... } }`. */
export const priceTableSchema = z.record(z.string().min(1, 'a model name must not be empty'), modelPriceSchema);
export type PriceTable = Readonly<Record<string, ModelPrice>>;

/**
 * Anthropic's prompt-cache prices as multiples of the model's input price (claude.com/pricing): reads 0.1x, writes
 * 1.25x for the 5-minute cache and 2x for the 1-hour one. Message Batches halve them as they halve the rest.
 */
export const ANTHROPIC_CACHE_RATIOS = { read: 0.1, write5m: 1.25, write1h: 2 } as const;

/** Whether a model is billed by Anthropic's rules (its cache ratios) when its price does not say otherwise. */
export const isAnthropicModel = (model: string): boolean => model.startsWith('claude-');

/** The list prices file: OpenAI's [input, output, cached input?] and Anthropic's [input, output] by model. */
const listPricesSchema = z.strictObject({
  openai: z.record(
    z.string(),
    z.union([z.tuple([perMillion, perMillion]), z.tuple([perMillion, perMillion, perMillion])]),
  ),
  anthropic: z.record(z.string(), z.tuple([perMillion, perMillion])),
});

const listPrices = listPricesSchema.parse(LIST_PRICES);

/**
 * Standard-tier list prices for text tokens, $ per million. OpenAI's input, output and cached-input figures are those
 * openai.com/api/pricing listed in 2025 and early 2026 (o1-mini's and o3-mini's cached price, half their input, is
 * from the list as it stood before they were retired from it: an assumption for anyone still served them);
 * gpt-4-turbo and gpt-3.5-turbo list no cached price, so they get no discount. Anthropic's are from claude.com/pricing
 * (2025), cache prices by ANTHROPIC_CACHE_RATIOS. Prices change and negotiated rates and priority tiers do not show
 * here: these are a starting point, and FANOUT_PRICES_FILE / FANOUT_PRICES override any entry (an override replaces
 * the whole entry: one without `cachedInputPerMillion` bills an OpenAI model's cached tokens at its input price). A
 * model missing from the table is reported unpriced, never as free.
 */
export const BUILT_IN_PRICES: PriceTable = Object.fromEntries([
  ...Object.entries(listPrices.openai).map(([model, [inputPerMillion, outputPerMillion, cachedInputPerMillion]]) => [
    model,
    { inputPerMillion, outputPerMillion, ...(cachedInputPerMillion === undefined ? {} : { cachedInputPerMillion }) },
  ]),
  ...Object.entries(listPrices.anthropic).map(([model, [inputPerMillion, outputPerMillion]]) => [
    model,
    {
      inputPerMillion,
      outputPerMillion,
      cachedInputPerMillion: inputPerMillion * ANTHROPIC_CACHE_RATIOS.read,
      cacheWrite5mPerMillion: inputPerMillion * ANTHROPIC_CACHE_RATIOS.write5m,
      cacheWrite1hPerMillion: inputPerMillion * ANTHROPIC_CACHE_RATIOS.write1h,
    },
  ]),
]) as PriceTable;

/** What the agent activities need to price their calls. */
export interface PricingDependencies {
  /** Prices by model. Default: pricesFromEnvironment(). */
  prices: PriceTable;
}
