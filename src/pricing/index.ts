export { BUILT_IN_PRICES, modelPriceSchema, priceTableSchema, type ModelPrice, type PricingDependencies, type PriceTable } from './price-table';
export { priceFor, priceOf, withCost, type CostFields } from './price-of';
export { PriceConfigError, pricesFromEnvironment } from './from-environment';
