import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { PlainTask } from './activities';
import type { journaledAgents, plainAgents, plainBatch, plainFanOut } from './workflows';

/** Runs `plainFanOut` and waits for its results. */
export function runPlainFanOut(client: Client, taskQueue: string, tasks: PlainTask[]): Promise<string[]> {
  return client.workflow.execute<typeof plainFanOut>('plainFanOut', {
    taskQueue,
    workflowId: `plain-fanout-${randomUUID()}`,
    args: [tasks],
  });
}

/** Runs `plainBatch` (through all its continue-as-new runs) and waits for its counts. */
export function runPlainBatch(
  client: Client,
  taskQueue: string,
  count: number,
  concurrency: number,
): ReturnType<typeof plainBatch> {
  return client.workflow.execute<typeof plainBatch>('plainBatch', {
    taskQueue,
    workflowId: `plain-batch-${randomUUID()}`,
    args: [{ count, concurrency }],
  });
}

/**
 * Runs `plainAgents` (one child workflow per prompt), or `journaledAgents` (the design probe: one journaled activity
 * per prompt), and waits for every agent's result.
 */
export function runPlainAgents(
  client: Client,
  taskQueue: string,
  prompts: string[],
  maxSteps: number,
  workflowId = `plain-agents-${randomUUID()}`,
  workflow: 'plainAgents' | 'journaledAgents' = 'plainAgents',
): ReturnType<typeof plainAgents> {
  return client.workflow.execute<typeof plainAgents | typeof journaledAgents>(workflow, {
    taskQueue,
    workflowId,
    args: [{ prompts, maxSteps }],
  });
}
