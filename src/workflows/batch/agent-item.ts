import {
  CancellationScope,
  ChildWorkflowCancellationType,
  ParentClosePolicy,
  executeChild,
} from '@temporalio/workflow';
import type { LaneResult } from '../../activities/batch-activities';
import type { BatchEntry, BatchResultLine } from '../../contract/batch';
import { FailureType } from '../../contract/failure-types';
import { childOf, segmentName } from '../../contract/location';
import { DEFAULT_INLINE_OUTPUT_BYTES } from '../../contract/payload-ref';
import type { ResolvedRunOptions } from '../../contract/run-options';
import type { agent } from '../agent/agent';
import { agentWorkflowId } from '../agent/agent-child';
import { childFailure, spendOfFailure } from '../agent/child-failure';
import type { AgentOutcome } from '../agent/types';
import type { storageActivities } from './activity-options';
import type { WindowInput } from './window-contract';

/**
 * Most agent items one window runs at once (each a pending child workflow; Temporal allows 2,000 per workflow, and a
 * window's lanes are pending activities beside them).
 */
export const MAX_AGENTS_PER_WINDOW = 1000;

/** Where an agent item of the batch keeps its place (AgentInput.place), by its id: the same in every run of the batch. */
export function agentPlaceOf(places: string, itemId: string): string {
  return childOf(places, segmentName(itemId));
}

/** An agent's outcome as its line in the sink: an agent stopped by a budget is a failed item (BudgetExhausted). */
function outcomeLine(id: string, outcome: AgentOutcome, durationMs: number): BatchResultLine {
  const spend = {
    usage: outcome.usage,
    ...(outcome.unpriced ? { unpriced: true as const } : { costUsd: outcome.costUsd }),
    steps: outcome.steps,
    ...(outcome.transcript === undefined ? {} : { transcriptRef: outcome.transcript }),
  };
  if (outcome.status === 'stopped') {
    const message = outcome.message ?? `agent "${id}" stopped on a budget`;
    return {
      id,
      status: 'failed',
      error: { type: FailureType.BudgetExhausted, message },
      attempts: 1,
      durationMs,
      ...spend,
    };
  }
  return {
    id,
    status: 'ok',
    ...(outcome.output === undefined ? {} : { output: outcome.output }),
    ...(outcome.outputRef === undefined ? {} : { outputRef: outcome.outputRef }),
    attempts: 1,
    durationMs,
    ...(outcome.model === undefined ? {} : { model: outcome.model }),
    ...spend,
  };
}

/**
 * Runs one agent item of a window: the `agent` workflow as a child (its id and place derived from the batch and the
 * item, so a resume finds both), then its line sealed as a lane of one item. Cancelled, the child is cancelled and
 * waited for (it saves its place first) and nothing is sealed: a resume runs the item again from that place. Once the
 * child has ended, its line is sealed whatever happens to the window.
 */
export async function runAgentItem(
  input: WindowInput,
  entry: BatchEntry,
  lane: string,
  context: {
    runOptions: ResolvedRunOptions;
    io: ReturnType<typeof storageActivities>;
    /** What the batch has spent so far: what is left of its token and dollar budgets is shared with the agent. */
    spent: { tokens: number; usd: number };
    /** The window's running agents (its progress lists them): the agent's id is in it while it runs. */
    agents: Set<string>;
  },
): Promise<LaneResult> {
  const { runOptions, io, spent } = context;
  const { tokenBudget, costBudgetUsd } = runOptions;
  const left = {
    ...(tokenBudget === undefined ? {} : { tokens: Math.max(0, Math.floor(tokenBudget - spent.tokens)) }),
    ...(costBudgetUsd === undefined ? {} : { costUsd: Math.max(0, costBudgetUsd - spent.usd) }),
  };
  const place = input.agentPlaces === undefined ? undefined : agentPlaceOf(input.agentPlaces, entry.id);
  const startedAt = Date.now();
  const workflowId = agentWorkflowId(input.batchWorkflowId, entry.id);
  let line: BatchResultLine;
  context.agents.add(workflowId);
  try {
    const outcome = await executeChild<typeof agent>('agent', {
      workflowId,
      args: [
        {
          item: {
            file: input.file,
            fileBytes: input.fileBytes,
            id: entry.id,
            offset: entry.offset,
            length: entry.length,
          },
          ...(place === undefined ? {} : { place }),
          options: {
            retry: runOptions.retry,
            agentTimeoutMs: runOptions.agentTimeoutMs,
            ...(runOptions.heartbeatTimeoutMs === undefined
              ? {}
              : { heartbeatTimeoutMs: runOptions.heartbeatTimeoutMs }),
          },
          inlineOutputBytes: DEFAULT_INLINE_OUTPUT_BYTES,
          sharedBudget: left,
        },
      ],
      cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
      parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
      staticSummary: `agent ${entry.id} of batch ${input.batchId}`,
    });
    line = outcomeLine(entry.id, outcome, Date.now() - startedAt);
  } catch (error) {
    const failure = childFailure(error);
    if (failure.cancelled) throw error;
    const spend = spendOfFailure(error);
    line = {
      id: entry.id,
      status: 'failed',
      error: { type: failure.type, message: failure.message },
      attempts: 1,
      durationMs: Date.now() - startedAt,
      ...(spend === undefined
        ? {}
        : { usage: spend.usage, ...(spend.unpriced ? { unpriced: true as const } : { costUsd: spend.costUsd }) }),
    };
  } finally {
    context.agents.delete(workflowId);
  }
  const sealed = line;
  return CancellationScope.nonCancellable(() =>
    io.sealAgentItem({ spool: input.spool, lane, line: sealed, ...(place === undefined ? {} : { place }) }),
  );
}
