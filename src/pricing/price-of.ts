import type { TokenUsage } from '../contract/token-usage';
import { roundUsd } from '../contract/metrics';
import {
  ANTHROPIC_CACHE_RATIOS,
  isAnthropicModel,
  type ModelPrice,
  type PriceTable,
  type PriceTier,
} from './price-table';

/** A provider's pinned snapshot name: `gpt-4o-2024-08-06` is billed as `gpt-4o`. */
const DATED_SUFFIX = /-\d{4}-\d{2}-\d{2}$/;

/** The price of a model: its exact name first, then the name without a dated-snapshot suffix. */
export function priceFor(model: string, table: PriceTable): ModelPrice | undefined {
  if (Object.hasOwn(table, model)) return table[model];
  const undated = model.replace(DATED_SUFFIX, '');
  return undated !== model && Object.hasOwn(table, undated) ? table[undated] : undefined;
}

/** A model's $ per million tokens in a tier: batch defaults to half the standard price, flex to the batch price. */
export function tierRates(price: ModelPrice, tier: PriceTier): { input: number; output: number } {
  const batch = {
    input: price.batchInputPerMillion ?? price.inputPerMillion / 2,
    output: price.batchOutputPerMillion ?? price.outputPerMillion / 2,
  };
  if (tier === 'batch') return batch;
  if (tier === 'flex')
    return { input: price.flexInputPerMillion ?? batch.input, output: price.flexOutputPerMillion ?? batch.output };
  return { input: price.inputPerMillion, output: price.outputPerMillion };
}

/** Every rate one call can be billed at, $ per million tokens, in a tier. */
export interface CallRates {
  input: number;
  output: number;
  /** Prompt tokens read from the cache. */
  cachedInput: number;
  cacheWrite5m: number;
  cacheWrite1h: number;
}

/**
 * A model's rates in a tier, cache prices included: the listed (or Anthropic's) standard cache prices, discounted as
 * the tier discounts input (the batch discount stacks on cache reads and writes). Without a listed cached price the
 * cache rates are the input rate: never less.
 */
export function callRates(model: string, price: ModelPrice, tier: PriceTier): CallRates {
  const { input, output } = tierRates(price, tier);
  const discount = price.inputPerMillion > 0 ? input / price.inputPerMillion : 1;
  const anthropic = isAnthropicModel(model);
  const standard = (listed: number | undefined, ratio: number) =>
    listed ?? (anthropic ? price.inputPerMillion * ratio : price.inputPerMillion);
  return {
    input,
    output,
    cachedInput: Math.min(input, standard(price.cachedInputPerMillion, ANTHROPIC_CACHE_RATIOS.read) * discount),
    cacheWrite5m: standard(price.cacheWrite5mPerMillion, ANTHROPIC_CACHE_RATIOS.write5m) * discount,
    cacheWrite1h: standard(price.cacheWrite1hPerMillion, ANTHROPIC_CACHE_RATIOS.write1h) * discount,
  };
}

/** What a call cost, and what the provider's prompt cache saved against the same tokens billed as uncached input. */
export interface CallCost {
  costUsd: number;
  /** Cost without caching less the cost: what cache reads saved, less what cache writes cost above input (may be < 0). */
  cacheSavingsUsd: number;
}

/** Whether a provider reported any prompt-cache tokens for a call. */
export function hasCacheTokens(usage: TokenUsage | undefined): boolean {
  return (
    (usage?.cachedPromptTokens ?? 0) > 0 || (usage?.cacheWrite5mTokens ?? 0) > 0 || (usage?.cacheWrite1hTokens ?? 0) > 0
  );
}

/**
 * What a call cost in US dollars, from the model the provider says answered and the tokens it reports: its uncached
 * prompt tokens at the input rate, cache reads and writes at theirs, completion tokens at the output rate. Undefined
 * when the model has no price or the provider reported no usage: an unknown cost, never $0.
 *
 * @example
 * callCost('gpt-4o', { promptTokens: 2000, cachedPromptTokens: 1024, completionTokens: 100, totalTokens: 2100 }, BUILT_IN_PRICES)
 * // { costUsd: 0.00472, cacheSavingsUsd: 0.00128 }
 */
export function callCost(
  model: string,
  usage: TokenUsage | undefined,
  table: PriceTable,
  tier: PriceTier = 'standard',
): CallCost | undefined {
  const price = priceFor(model, table);
  if (price === undefined || usage === undefined) return undefined;
  const rates = callRates(model, price, tier);
  const prompt = Math.max(0, usage.promptTokens);
  // Parts of promptTokens, each taken at most from what is left: a provider's inconsistent counts never bill less.
  const cached = Math.min(prompt, Math.max(0, usage.cachedPromptTokens ?? 0));
  const write5m = Math.min(prompt - cached, Math.max(0, usage.cacheWrite5mTokens ?? 0));
  const write1h = Math.min(prompt - cached - write5m, Math.max(0, usage.cacheWrite1hTokens ?? 0));
  const uncached = prompt - cached - write5m - write1h;
  const output = usage.completionTokens * rates.output;
  const billed =
    uncached * rates.input +
    cached * rates.cachedInput +
    write5m * rates.cacheWrite5m +
    write1h * rates.cacheWrite1h +
    output;
  const withoutCache = prompt * rates.input + output;
  const costUsd = roundUsd(billed / 1_000_000);
  return { costUsd, cacheSavingsUsd: roundUsd(roundUsd(withoutCache / 1_000_000) - costUsd) };
}

/**
 * What a call cost in US dollars (callCost's `costUsd`), or undefined when unknown.
 *
 * @example
 * priceOf('gpt-4o-2024-08-06', { promptTokens: 1000, completionTokens: 200, totalTokens: 1200 }, BUILT_IN_PRICES) // 0.0045
 */
export function priceOf(
  model: string,
  usage: TokenUsage | undefined,
  table: PriceTable,
  tier: PriceTier = 'standard',
): number | undefined {
  return callCost(model, usage, table, tier)?.costUsd;
}

/**
 * A call's cost as the fields a result carries: `costUsd` when known, else `unpriced: true`; `cacheSavingsUsd` when
 * the provider reported prompt-cache tokens.
 */
export type CostFields =
  | { costUsd: number; cacheSavingsUsd?: number; unpriced?: never }
  | { costUsd?: never; cacheSavingsUsd?: never; unpriced: true };

/** The cost fields of a call. */
export function costFields(
  model: string,
  usage: TokenUsage | undefined,
  table: PriceTable,
  tier: PriceTier = 'standard',
): CostFields {
  const cost = callCost(model, usage, table, tier);
  if (cost === undefined) return { unpriced: true };
  return hasCacheTokens(usage) ? cost : { costUsd: cost.costUsd };
}

/** Adds the cost fields to a call's result. */
export function withCost<T extends { model: string; usage?: TokenUsage; serviceTier?: string }>(
  call: T,
  table: PriceTable,
  tier?: PriceTier,
): T & CostFields {
  return {
    ...call,
    ...costFields(call.model, call.usage, table, tier ?? (call.serviceTier === 'flex' ? 'flex' : 'standard')),
  };
}
