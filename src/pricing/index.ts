export {
  ANTHROPIC_CACHE_RATIOS,
  BUILT_IN_PRICES,
  isAnthropicModel,
  modelPriceSchema,
  priceTableSchema,
  type ModelPrice,
  type PricingDependencies,
  type PriceTable,
  type PriceTier,
} from './price-table';
export {
  callCost,
  callRates,
  costFields,
  hasCacheTokens,
  priceFor,
  priceOf,
  tierRates,
  withCost,
  type CallCost,
  type CallRates,
  type CostFields,
} from './price-of';
export { PriceConfigError, pricesFromEnvironment } from './from-environment';
