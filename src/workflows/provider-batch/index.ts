export { providerBatch } from './provider-batch';
export { providerBatchProgressQuery } from './messages';
export { runProviderBatch } from './run-provider-batch';
export type {
  CarriedPart,
  ProviderBatchCarried,
  ProviderBatchHooks,
  ProviderBatchInfo,
  ProviderBatchInput,
  ProviderBatchProgress,
  ProviderBatchResult,
  ProviderBatchRouteOptions,
} from './types';
