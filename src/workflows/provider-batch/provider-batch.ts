import { continueAsNew, setCurrentDetails, setHandler } from '@temporalio/workflow';
import { providerBatchProgressQuery } from './messages';
import { runProviderBatch } from './run-provider-batch';
import type { ProviderBatchInput, ProviderBatchProgress, ProviderBatchResult } from './types';

/** The provider-batch route as a workflow of its own: `providerBatchProgress` answers how far it is. */
export async function providerBatch(input: ProviderBatchInput): Promise<ProviderBatchResult> {
  let latest: ProviderBatchProgress = {
    parts: 0,
    collected: 0,
    succeeded: 0,
    failed: 0,
    retried: 0,
    providerBatches: [],
    savingsUsd: 0,
  };
  setHandler(providerBatchProgressQuery, () => latest);
  return runProviderBatch(input, {
    onProgress: (progress) => {
      latest = progress;
      // Shown in the UI whoever started the run (a static summary is only ever the starter's); not a command.
      setCurrentDetails(
        `provider batches of batch ${input.batchId}: ${progress.collected} of ${progress.parts} parts collected, ${progress.succeeded} answered, ${progress.failed} failed`,
      );
    },
    handOver: (carried) => continueAsNew<typeof providerBatch>({ ...input, carried }),
  });
}
