import type { TokenUsage } from '../contract/agent-task';
import { roundUsd } from '../contract/metrics';
import type { ModelPrice, PriceTable, PriceTier } from './price-table';

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

/**
 * What a call cost in US dollars, from the model the provider says answered and the tokens it reports. Undefined
 * when the model has no price or the provider reported no usage: an unknown cost, never $0.
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
  const price = priceFor(model, table);
  if (price === undefined || usage === undefined) return undefined;
  const rates = tierRates(price, tier);
  return roundUsd((usage.promptTokens * rates.input + usage.completionTokens * rates.output) / 1_000_000);
}

/** A call's cost as the fields a result carries: `costUsd` when known, else `unpriced: true`. */
export type CostFields = { costUsd: number; unpriced?: never } | { costUsd?: never; unpriced: true };

/** Adds the cost fields to a call's result. */
export function withCost<T extends { model: string; usage?: TokenUsage; serviceTier?: string }>(
  call: T,
  table: PriceTable,
  tier?: PriceTier,
): T & CostFields {
  const costUsd = priceOf(call.model, call.usage, table, tier ?? (call.serviceTier === 'flex' ? 'flex' : 'standard'));
  return costUsd === undefined ? { ...call, unpriced: true } : { ...call, costUsd };
}
