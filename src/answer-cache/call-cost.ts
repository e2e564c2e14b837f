import type { TokenUsage } from '../contract/token-usage';
import type { PriceTable } from '../pricing/price-table';
import { withCost, type CostFields } from '../pricing/price-of';

/** What a call answered from the answer cache adds to its result: it cost nothing, and saved what the provider billed. */
export interface CacheFields {
  /** The answer came from the answer cache (or an identical request in flight beside it): nothing was sent. */
  cached?: boolean;
  /** For a cached answer: what the provider would have billed for it, US dollars, from the usage it was first answered with. */
  savedUsd?: number;
}

/**
 * The cost fields of a call's result. A call that was sent is priced as ever (`withCost`); one answered from the cache
 * costs $0, uses no tokens (its usage is left out, so no token budget counts it), and reports as `savedUsd` what the
 * provider billed when it was answered.
 */
export function withCallCost<T extends { model: string; usage?: TokenUsage; serviceTier?: string; cached?: boolean }>(
  call: T,
  table: PriceTable,
): Omit<T, 'usage'> & { usage?: TokenUsage } & CostFields & CacheFields {
  if (!call.cached) return withCost(call, table);
  const billed = withCost(call, table);
  const { usage: _usage, ...rest } = call;
  return { ...rest, cached: true, costUsd: 0, ...(billed.costUsd === undefined ? {} : { savedUsd: billed.costUsd }) };
}
