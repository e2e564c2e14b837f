import type { WorkflowHandle } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';

/** Activities the server still counts as pending for a run (none, once everything it started has stopped). */
export async function pendingActivities(workflow: WorkflowHandle): Promise<number> {
  const description = await workflow.describe();
  return description.raw.pendingActivities?.length ?? 0;
}

/** Decodes a JSON payload (as the default converter writes it) to its value. */
export function decodePayload(payload: { data?: Uint8Array | null } | null | undefined): unknown {
  if (!payload?.data) return undefined;
  return JSON.parse(Buffer.from(payload.data).toString('utf8'));
}

/** The workflow ids of the children a run started, in the order it started them (a batch's windows). */
export function childWorkflowIds(history: temporal.api.history.v1.IHistory): string[] {
  return (history.events ?? []).flatMap(
    (event) => event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId ?? [],
  );
}

/** When the server recorded `event`, in ms since the epoch (its clock, the same machine's); undefined without a time. */
export function eventTimeMs(event: temporal.api.history.v1.IHistoryEvent): number | undefined {
  if (!event.eventTime) return undefined;
  return Number(event.eventTime.seconds ?? 0) * 1000 + Math.floor((event.eventTime.nanos ?? 0) / 1e6);
}

/**
 * When a batch's stop had certainly reached its lanes (its cancel, a fail-fast, a budget, a failure), by the server's
 * clock (the same machine's), or undefined where no lane was cancelled: the first time a lane whose window had asked it to
 * cancel ended (completed, cancelled, failed or timed out) in the histories of the windows the batch started. A lane
 * ends only after it has heard of the stop, and the lanes of a window on one worker hear of it together.
 */
export async function lanesStoppedAt(batch: WorkflowHandle): Promise<number | undefined> {
  let first: number | undefined;
  for (const id of new Set(childWorkflowIds(await batch.fetchHistory()))) {
    const cancelRequested = new Set<string>();
    for (const event of (await batch.client.getHandle(id).fetchHistory()).events ?? []) {
      const requested = event.activityTaskCancelRequestedEventAttributes?.scheduledEventId;
      if (requested !== undefined && requested !== null) cancelRequested.add(String(requested));
      const ended =
        event.activityTaskCompletedEventAttributes ??
        event.activityTaskCanceledEventAttributes ??
        event.activityTaskFailedEventAttributes ??
        event.activityTaskTimedOutEventAttributes;
      const at = eventTimeMs(event);
      if (!ended || at === undefined || !cancelRequested.has(String(ended.scheduledEventId))) continue;
      first = first === undefined ? at : Math.min(first, at);
    }
  }
  return first;
}
