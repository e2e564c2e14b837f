import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { AgentTask } from '../src/contract/agent-task';
import { maxOverlap } from './support/overlap';
import { startTestServers, startTestWorker, type TestServers, type TestWorker } from './support/test-stack';

let servers: TestServers;
const workers: TestWorker[] = [];

beforeAll(async () => {
  servers = await startTestServers();
});

afterAll(async () => {
  for (const worker of workers) await worker.stop();
  await servers?.stop();
});

function tasks(prefix: string, count: number, latencyMs: number): AgentTask[] {
  return Array.from({ length: count }, (_, index) => ({ id: `${prefix}-${index}`, prompt: `x [sim latency=${latencyMs}]` }));
}

it('passes SDK WorkerOptions through, over the settings it derives itself', async () => {
  const executed: string[] = [];
  const recordActivities: ActivityInterceptorsFactory = (context) => ({
    inbound: {
      execute: (input, next) => {
        executed.push(context.info.activityType);
        return next(input);
      },
    },
  });
  const stack = await startTestWorker(servers, {
    identity: 'from-fanout-option',
    shutdownGraceMs: 5000,
    workerOptions: { identity: 'from-worker-options', shutdownGraceTime: 1234, interceptors: { activity: [recordActivities] } },
  });
  workers.push(stack);

  expect(stack.worker.options.identity).toBe('from-worker-options');
  expect(stack.worker.options.shutdownGraceTimeMs).toBe(1234);
  const { results } = await stack.client.runParallel(tasks('intercepted', 2, 10));
  expect(results.map((result) => result.status)).toEqual(['ok', 'ok']);
  expect(executed).toEqual(['callAgent', 'callAgent']);
});

it('takes a tuner in place of its own slot count', async () => {
  // The SDK refuses a tuner together with maxConcurrentActivityTaskExecutions, which the worker sets by default.
  const stack = await startTestWorker(servers, {
    maxConcurrentActivities: 500,
    workerOptions: {
      tuner: {
        workflowTaskSlotSupplier: { type: 'fixed-size', numSlots: 10 },
        activityTaskSlotSupplier: { type: 'fixed-size', numSlots: 3 },
        localActivityTaskSlotSupplier: { type: 'fixed-size', numSlots: 1 },
        nexusTaskSlotSupplier: { type: 'fixed-size', numSlots: 1 },
      },
    },
  });
  workers.push(stack);

  const handle = await stack.client.startParallel(tasks('tuned', 9, 300));
  const { results } = await handle.result();
  expect(results.every((result) => result.status === 'ok')).toBe(true);
  const requests = servers.simulator.log().filter((request) => request.workflowId === handle.workflowId);
  expect(requests).toHaveLength(9);
  expect(maxOverlap(requests)).toBe(3);
});
