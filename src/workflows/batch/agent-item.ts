import {
  CancellationScope,
  ChildWorkflowCancellationType,
  ParentClosePolicy,
  executeChild,
  setHandler,
} from '@temporalio/workflow';
import type { LaneResult } from '../../contract/batch-activities';
import type { BatchCounters, BatchEntry, BatchResultLine } from '../../contract/batch';
import { FailureType } from '../../contract/failure-types';
import { childOf, segmentName } from '../../contract/location';
import { DEFAULT_INLINE_OUTPUT_BYTES } from '../../contract/payload-ref';
import type { ResolvedRunOptions } from '../../contract/run-option-defaults';
import type { agent } from '../agent/agent';
import { agentWorkflowId } from '../agent/agent-child';
import { childFailure, spendOfFailure, startOnceFree, type FailureSpend } from '../agent/child-failure';
import { agentSpendSignal } from '../agent/messages';
import { spendSince } from '../agent/spend';
import type { AgentOutcome } from '../../contract/agent-loop';
import type { storageActivities } from './activity-options';
import { addCounters } from './counters';
import { FATAL_TYPES } from './failures';
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
    ...(outcome.unpriced
      ? { unpriced: true as const }
      : {
          costUsd: outcome.costUsd,
          ...(outcome.cacheSavingsUsd === undefined ? {} : { cacheSavingsUsd: outcome.cacheSavingsUsd }),
        }),
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
 * The agent items of a window: each the `agent` workflow as a child (its id and place derived from the batch and the
 * item, so a resume finds both), then its line sealed as a lane of one item. Cancelled with the window, the child is
 * cancelled and waited for (it saves its place first) and nothing is sealed: a resume runs the item again from that
 * place. Once the child has ended, its line is sealed whatever happens to the window.
 *
 * Spend: an item's line holds all its agent spent, across the batch's runs (its place carries it); the window counts
 * only this run's (the earlier runs counted the rest), and a cancelled agent's comes by agentSpendSignal. Budgets: each
 * agent shares what is left of the batch's, less what agents running already hold, evenly over the slots that may still
 * take one, so agents started together cannot each spend all that is left.
 */
export class AgentItems {
  /** Workflow ids of the agents running now (the window's progress lists them). */
  readonly running = new Set<string>();
  private readonly holds = new Map<string, { tokens: number; usd: number }>();

  constructor(
    private readonly input: WindowInput,
    private readonly runOptions: ResolvedRunOptions,
    private readonly io: ReturnType<typeof storageActivities>,
    /** The window's counters: a cancelled agent's spend of this run is added to them. */
    counters: BatchCounters,
  ) {
    setHandler(agentSpendSignal, ({ spend: { usage, costUsd } }) =>
      addCounters(counters, {
        ...{ succeeded: 0, failed: 0, cost: { usd: costUsd, unpricedCalls: 0 } },
        tokens: { prompt: usage.promptTokens, completion: usage.completionTokens, total: usage.totalTokens },
      }),
    );
  }

  /** What running agents may still spend of the batch's budgets: a successor window counts it as spent. */
  held(): { tokens: number; usd: number } {
    let tokens = 0;
    let usd = 0;
    for (const hold of this.holds.values()) {
      tokens += hold.tokens;
      usd += hold.usd;
    }
    return { tokens, usd };
  }

  hasRoom(): boolean {
    return this.running.size < MAX_AGENTS_PER_WINDOW;
  }

  /** What an agent started now may spend: an even share of what is left and not held, over `slots` (at least 1). */
  private share(spent: { tokens: number; usd: number }, slots: number): { tokens?: number; costUsd?: number } {
    const { tokenBudget, costBudgetUsd } = this.runOptions;
    const { tokens, usd } = this.held();
    const part = (budget: number, used: number) => Math.max(0, budget - used) / Math.max(1, slots);
    return {
      ...(tokenBudget === undefined ? {} : { tokens: Math.floor(part(tokenBudget, spent.tokens + tokens)) }),
      ...(costBudgetUsd === undefined ? {} : { costUsd: part(costBudgetUsd, spent.usd + usd) }),
    };
  }

  /** Runs the agent item; `slots` is how many agents could still start beside it (the window's room and items left). */
  async run(
    entry: BatchEntry,
    lane: string,
    spent: { tokens: number; usd: number },
    slots: number,
  ): Promise<LaneResult> {
    const { input, runOptions } = this;
    const place = input.agentPlaces === undefined ? undefined : agentPlaceOf(input.agentPlaces, entry.id);
    const startedAt = Date.now();
    const workflowId = agentWorkflowId(input.batchWorkflowId, entry.id);
    const left = this.share(spent, slots);
    let line: BatchResultLine;
    let before: FailureSpend['before'];
    this.running.add(workflowId);
    this.holds.set(workflowId, { tokens: left.tokens ?? 0, usd: left.costUsd ?? 0 });
    const start = () =>
      executeChild<typeof agent>('agent', {
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
              // The batch's answer cache, for the agent's model steps (its input, not a command).
              ...(input.call?.cache ? { cache: input.call.cache } : {}),
            },
            inlineOutputBytes: DEFAULT_INLINE_OUTPUT_BYTES,
            sharedBudget: left,
          },
        ],
        cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        staticSummary: `agent ${entry.id} of batch ${input.batchId}`,
      });
    try {
      const outcome = await startOnceFree(start);
      before = outcome.before;
      line = outcomeLine(entry.id, outcome, Date.now() - startedAt);
    } catch (error) {
      const failure = childFailure(error);
      // Cancelled with the window: a resume goes on from its place. Cancelled on its own (from the UI): a failed line.
      if (failure.cancelled && CancellationScope.current().consideredCancelled) throw error;
      // The batch's own failures (its file changed, its storage is gone) end the batch, as a lane's do.
      if (failure.type !== FailureType.InvalidInput && FATAL_TYPES.includes(failure.type)) throw failure.cause;
      const spend = spendOfFailure(error);
      before = spend?.before;
      line = {
        id: entry.id,
        status: 'failed',
        error: {
          type: failure.type,
          message: failure.cancelled ? `agent ${workflowId} was cancelled` : failure.message,
        },
        attempts: 1,
        durationMs: Date.now() - startedAt,
        ...(spend === undefined
          ? {}
          : { usage: spend.usage, ...(spend.unpriced ? { unpriced: true as const } : { costUsd: spend.costUsd }) }),
      };
    } finally {
      this.running.delete(workflowId);
      this.holds.delete(workflowId);
    }
    const sealed = line;
    const result = await CancellationScope.nonCancellable(() =>
      this.io.sealAgentItem({ spool: input.spool, lane, line: sealed, ...(place === undefined ? {} : { place }) }),
    );
    // The window counts what this run spent: the line says all the agent spent.
    const counted = spendSince({ usage: lineUsage(result), costUsd: result.costUsd }, before);
    return {
      ...result,
      tokens: {
        prompt: counted.usage.promptTokens,
        completion: counted.usage.completionTokens,
        total: counted.usage.totalTokens,
        // What of it was cached is known for the whole agent only: counted when it all ran in this run.
        ...(before === undefined && result.tokens.cached !== undefined ? { cached: result.tokens.cached } : {}),
      },
      costUsd: counted.costUsd,
      ...(before === undefined && result.cacheSavingsUsd !== undefined
        ? { cacheSavingsUsd: result.cacheSavingsUsd }
        : { cacheSavingsUsd: undefined }),
    };
  }
}

/** A lane result's tokens as usage. */
function lineUsage(result: LaneResult) {
  return {
    promptTokens: result.tokens.prompt,
    completionTokens: result.tokens.completion,
    totalTokens: result.tokens.total,
  };
}
