import { sinkCounts, startTaskBatch } from './support/batch-files';
import { useProviderBatchStack } from './support/provider-batch-stack';
import { requestsOfRun } from './support/request-ledger';

/**
 * The provider-batch route's hand-back to sync past Temporal's payload limit (issue 33, finding 4). The dev server's
 * limit is lowered to 16 KB, so 600 handed-back items (about 36 KB of entries) stand for the 30-40k that pass the real
 * 2 MB one.
 */
const BLOB_LIMIT_BYTES = 16 * 1024;

const suite = useProviderBatchStack(
  // Every item expires in its provider batches (1.5 s each at 1,000 x), so every one is handed back.
  { providerBatches: { speed: 1000, processingSeconds: { min: 100, max: 300 }, expiresAfterSeconds: 1500 } },
  ['openai'],
  { dynamicConfig: { 'limit.blobSize.error': BLOB_LIMIT_BYTES, 'limit.blobSize.warn': BLOB_LIMIT_BYTES / 2 } },
);

it('sends a hand-back larger than the payload limit sync, each item once, as a task file the windows page through', async () => {
  const { handle, sink } = await startTaskBatch(suite.stack.client, 'handed-back', 600, 'late [sim batch=expired]', {
    route: 'provider-batch',
    providerPollSeconds: 0.05,
    concurrency: 20,
    pageSize: 20,
  });
  // Before: the entries, in one activity result, passed the limit, and the batch never sent them sync.
  expect(await handle.result()).toMatchObject({ route: 'provider-batch', total: 600, succeeded: 600, failed: 0 });
  expect(sinkCounts(sink)).toEqual({ lines: 600, ids: 600, ok: 600 });
  const requests = requestsOfRun(suite.servers.simulator.log(), handle.batchId);
  expect(requests).toHaveLength(600);
  expect(new Set(requests.map((request) => request.taskId)).size).toBe(600);
}, 180_000);
