import { defineQuery } from '@temporalio/workflow';
import type { ProviderBatchProgress } from './types';

export const providerBatchProgressQuery = defineQuery<ProviderBatchProgress>('providerBatchProgress');
