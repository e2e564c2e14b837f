export {
  BUILT_IN_PRICES,
  modelPriceSchema,
  priceTableSchema,
  type ModelPrice,
  type PricingDependencies,
  type PriceTable,
  type PriceTier,
} from './price-table';
export { priceFor, priceOf, tierRates, withCost, type CostFields } from './price-of';
export { PriceConfigError, pricesFromEnvironment } from './from-environment';
