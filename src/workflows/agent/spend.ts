import { addUsage, type TokenUsage } from '../../contract/token-usage';
import { addCacheSavings, roundUsd } from '../../contract/metrics';
import type { FailureSpend } from './child-failure';
import type { AgentSpend, AgentStopReason, SpendBefore } from '../../contract/agent-loop';

/** An agent's spend before its first step. */
export const emptySpend = (): AgentSpend => ({
  steps: 0,
  toolCalls: 0,
  usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
  costUsd: 0,
  unpricedSteps: 0,
});

/** Adds what a model step, or a sub-agent, spent to the agent's spend. */
export function addSpend(
  state: AgentSpend,
  spend: { usage?: TokenUsage; costUsd?: number; unpriced?: boolean; cacheSavingsUsd?: number },
): void {
  state.usage = addUsage(state.usage, spend.usage);
  state.costUsd = roundUsd(state.costUsd + (spend.costUsd ?? 0));
  if (spend.unpriced) state.unpricedSteps += 1;
  addCacheSavings(state, spend.cacheSavingsUsd);
}

/** What the agent reports it spent to the workflow that started it, when it fails or is cancelled. */
export function spendOf(state: AgentSpend & { before?: SpendBefore }): FailureSpend {
  return {
    usage: state.usage,
    costUsd: state.costUsd,
    ...(state.unpricedSteps > 0 ? { unpriced: true } : {}),
    ...(state.before ? { before: state.before } : {}),
  };
}

/**
 * What an agent spent in this run of its batch: its spend less what it had spent in earlier runs (`before`), which
 * those runs counted. The spend itself when it has no earlier runs.
 */
export function spendSince<T extends { usage: TokenUsage; costUsd: number }>(spend: T, before?: SpendBefore): T {
  if (before === undefined) return spend;
  return {
    ...spend,
    usage: {
      promptTokens: Math.max(0, spend.usage.promptTokens - before.usage.promptTokens),
      completionTokens: Math.max(0, spend.usage.completionTokens - before.usage.completionTokens),
      totalTokens: Math.max(0, spend.usage.totalTokens - before.usage.totalTokens),
    },
    costUsd: Math.max(0, roundUsd(spend.costUsd - before.costUsd)),
  };
}

/** The limits an agent stops at: its steps, and the tokens and dollars its task or its caller allow (none if undefined). */
export interface AgentBudgets {
  maxSteps: number;
  tokenLimit: number | undefined;
  costLimit: number | undefined;
}

/** The budget the agent has spent, if any, and why in words. */
export function budgetReached(
  state: AgentSpend,
  { maxSteps, tokenLimit, costLimit }: AgentBudgets,
): { reason: AgentStopReason; message: string } | undefined {
  if (state.steps >= maxSteps) return { reason: 'steps', message: `its step budget (${maxSteps}) is spent` };
  if (tokenLimit !== undefined && state.usage.totalTokens >= tokenLimit)
    return {
      reason: 'tokens',
      message: `its token budget (${tokenLimit}) is spent: ${state.usage.totalTokens} used`,
    };
  if (costLimit !== undefined && state.costUsd >= costLimit)
    return { reason: 'cost', message: `its cost budget ($${costLimit}) is spent: $${state.costUsd} used` };
  return undefined;
}

/** The smaller of two limits, either of which may be absent. */
export function minimum(first: number | undefined, second: number | undefined): number | undefined {
  if (first === undefined) return second;
  if (second === undefined) return first;
  return Math.min(first, second);
}
