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

/** Runs `plainAgents` (one child workflow per prompt) and waits for every agent's result. */
export function runPlainAgents(
  client: Client,
  taskQueue: string,
  prompts: string[],
  maxSteps: number,
  workflowId = `plain-agents-${randomUUID()}`,
): ReturnType<typeof plainAgents> {
  return client.workflow.execute<typeof plainAgents>('plainAgents', {
    taskQueue,
    workflowId,
    args: [{ prompts, maxSteps }],
  });
}

/** Runs `journaledAgents` (one journaled activity per prompt, the design probe) and waits for every agent's result. */
export function runJournaledAgents(
  client: Client,
  taskQueue: string,
  prompts: string[],
  maxSteps: number,
  workflowId = `journaled-agents-${randomUUID()}`,
): ReturnType<typeof journaledAgents> {
  return client.workflow.execute<typeof journaledAgents>('journaledAgents', {
    taskQueue,
    workflowId,
    args: [{ prompts, maxSteps }],
  });
}
