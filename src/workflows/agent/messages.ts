import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { FailureSpend } from './child-failure';
import type { AgentProgress, ApprovalDecision } from '../../contract/agent-loop';

/** An agent's spend, the approvals it waits for, its running sub-agents and its events after a cursor (0: all kept). */
export const agentProgressQuery = defineQuery<AgentProgress, [number?]>('agentProgress');

/** Approves or denies a tool call that waits (`fanout approve <run> <call> [--deny "why"]`). Rejected for a call that does not wait. */
export const approveUpdate = defineUpdate<{ callId: string; approved: boolean }, [ApprovalDecision]>('approve');

/**
 * What a cancelled agent had spent, sent to the workflow that started it (the run, or the agent that spawned it) just
 * before it ends: a cancelled workflow's end carries no details, as a failure's does. Sent only when it spent something.
 */
export const agentSpendSignal = defineSignal<[{ workflowId: string; spend: FailureSpend }]>('agentSpend');
