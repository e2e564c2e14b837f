/**
 * The workflows a worker registers, by type name. Temporal evaluates this module's whole import graph afresh for every
 * workflow it starts (each run has its own module cache in the sandbox), so the types that run many at a time import
 * what they need and no more: an agent (one per task, thousands in a run) must not pay for the batch, DAG and
 * validation schemas it never uses. The other types are loaded on their first call, in their own run's context.
 */
import type * as Batch from './batch';
import type * as Dag from './dag';
import type * as FanOut from './fan-out';
import type * as FanOutFanIn from './fan-out-fan-in';
import type * as ProviderBatch from './provider-batch';

export { agent, agentProgressQuery, approveUpdate } from './agent';
export { batchProgressQuery, eventsQuery, progressQuery } from './messages';

// Loaded on a run's first call: see the top of this file.
export function batch(...args: Parameters<typeof Batch.batch>): ReturnType<typeof Batch.batch> {
  return (require('./batch') as typeof Batch).batch(...args);
}

export function batchWindow(...args: Parameters<typeof Batch.batchWindow>): ReturnType<typeof Batch.batchWindow> {
  return (require('./batch') as typeof Batch).batchWindow(...args);
}

export function dag(...args: Parameters<typeof Dag.dag>): ReturnType<typeof Dag.dag> {
  return (require('./dag') as typeof Dag).dag(...args);
}

export function fanOut(...args: Parameters<typeof FanOut.fanOut>): ReturnType<typeof FanOut.fanOut> {
  return (require('./fan-out') as typeof FanOut).fanOut(...args);
}

export function fanOutFanIn(
  ...args: Parameters<typeof FanOutFanIn.fanOutFanIn>
): ReturnType<typeof FanOutFanIn.fanOutFanIn> {
  return (require('./fan-out-fan-in') as typeof FanOutFanIn).fanOutFanIn(...args);
}

export function providerBatch(
  ...args: Parameters<typeof ProviderBatch.providerBatch>
): ReturnType<typeof ProviderBatch.providerBatch> {
  return (require('./provider-batch') as typeof ProviderBatch).providerBatch(...args);
}

export { providerBatchProgressQuery } from './provider-batch/messages';
