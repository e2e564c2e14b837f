import { ChildWorkflowCancellationType, executeChild, ParentClosePolicy } from '@temporalio/workflow';
import type { BatchOptions, BatchProgress } from '../../contract/batch';
import { childOf } from '../../contract/location';
import { providerBatch } from '../provider-batch';

type RouteState = Pick<BatchProgress, 'route' | 'providerBatchWorkflow' | 'providerBatches' | 'savingsUsd'>;

/**
 * A batch's provider-batch route: the whole file sent as provider batches by a child workflow, whose state the batch's
 * progress shows while it runs (`routeState`) and whose batches it lists once it has ended. Returns what the child
 * reports, its items to send again sync (`retry`) among it.
 */
export async function sendProviderBatches(input: {
  batchId: string;
  workflowId: string;
  file: string;
  spool: string;
  deadlineAtMs: number;
  options: BatchOptions | undefined;
  routeState: RouteState;
}) {
  const { batchId, workflowId, options, routeState } = input;
  const pollSeconds = options?.providerPollSeconds;
  routeState.providerBatchWorkflow = workflowId;
  const sent = await executeChild(providerBatch, {
    workflowId,
    args: [
      {
        batchId,
        source: input.file,
        spool: childOf(input.spool, 'provider'),
        options: {
          deadlineAtMs: input.deadlineAtMs,
          ...(options?.provider ? { provider: options.provider } : {}),
          ...(options?.promptCache ? { promptCache: options.promptCache } : {}),
          ...(options?.api === 'responses' ? { endpoint: '/v1/responses' as const } : {}),
          // A batch that let `auto` choose the route sends a refused part's items sync rather than fail them.
          ...(options?.route === 'auto' ? { refusedPartsSync: true } : {}),
          ...(pollSeconds === undefined
            ? {}
            : { pollIntervalMs: pollSeconds * 1000, maxPollIntervalMs: Math.max(pollSeconds * 1000, 1000) }),
        },
      },
    ],
    cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
    parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
    staticSummary: `provider batches of batch ${batchId}`,
  });
  routeState.providerBatches = sent.providerBatches.map(({ provider, id, status, counts }) => ({
    provider,
    id,
    status,
    counts,
  }));
  routeState.savingsUsd = sent.savingsUsd;
  delete routeState.providerBatchWorkflow;
  return sent;
}
