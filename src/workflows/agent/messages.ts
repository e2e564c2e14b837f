import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { AgentProgress, ApprovalDecision } from './types';

/** An agent's spend, the approvals it waits for, its running sub-agents and its events after a cursor (0: all kept). */
export const agentProgressQuery = defineQuery<AgentProgress, [number?]>('agentProgress');

/** Approves or denies a tool call that waits (`fanout approve <run> <call> [--deny "why"]`). Rejected for a call that does not wait. */
export const approveUpdate = defineUpdate<{ callId: string; approved: boolean }, [ApprovalDecision]>('approve');
