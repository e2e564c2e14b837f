import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { AgentTask } from '../src/contract/agent-task';
import { maxOverlap } from './support/overlap';
import { FanoutClient } from '../src/client/fanout-client';
import { grpcCompressionFromEnvironment } from '../src/config/environment';
import { runCli, spawnWorker } from './support/processes';
import { useTestServers } from './support/suite-stack';
import { startTestWorker, uniqueName, type TestWorker } from './support/test-stack';

const workers: TestWorker[] = [];
const suite = useTestServers();
afterEach(async () => {
  for (const worker of workers.splice(0)) await worker.stop();
});

function tasks(prefix: string, count: number, latencyMs: number): AgentTask[] {
  return Array.from({ length: count }, (_, index) => ({
    id: `${prefix}-${index}`,
    prompt: `x [sim latency=${latencyMs}]`,
  }));
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
  const stack = await startTestWorker(suite.servers, {
    identity: 'from-fanout-option',
    shutdownGraceMs: 5000,
    workerOptions: {
      identity: 'from-worker-options',
      shutdownGraceTime: 1234,
      interceptors: { activity: [recordActivities] },
    },
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
  const stack = await startTestWorker(suite.servers, {
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
  const requests = suite.servers.simulator.log().filter((request) => request.workflowId === handle.workflowId);
  expect(requests).toHaveLength(9);
  expect(maxOverlap(requests)).toBe(3);
});

it("hands a fan-out's calls straight back to the worker that scheduled them (eager dispatch), whichever worker that is", async () => {
  // Two workers on one queue. Through matching the 30 calls would go to whichever polls first; eager, every call starts
  // on the worker whose workflow task scheduled it (the dev server enables system.enableActivityEagerExecution).
  const first = await startTestWorker(suite.servers, { identity: 'eager-a' });
  workers.push(first);
  const second = await spawnWorker({
    address: suite.servers.server.address,
    taskQueue: first.taskQueue,
    env: {
      OPENAI_BASE_URL: suite.servers.simulator.baseUrl,
      OPENAI_API_KEY: 'test-key',
      FANOUT_WORKER_IDENTITY: 'eager-b',
    },
  });
  workers.push({ ...first, stop: () => second.stop() });

  for (const round of [1, 2, 3, 4]) {
    const handle = await first.client.startParallel(tasks(`eager-${round}`, 30, 300));
    expect((await handle.result()).results.every((result) => result.status === 'ok')).toBe(true);
    const events = (await handle.workflow.fetchHistory()).events ?? [];
    const byId = new Map(events.map((event) => [String(event.eventId), event]));
    const starts = events.filter((event) => event.activityTaskStartedEventAttributes);
    expect(starts).toHaveLength(30);
    for (const start of starts) {
      const scheduled = byId.get(String(start.activityTaskStartedEventAttributes?.scheduledEventId));
      const scheduler = byId.get(String(scheduled?.activityTaskScheduledEventAttributes?.workflowTaskCompletedEventId));
      expect(start.activityTaskStartedEventAttributes?.identity).toBe(
        scheduler?.workflowTaskCompletedEventAttributes?.identity,
      );
    }
  }
});

it.each([
  ['the default', undefined, 5],
  ['2', 2, 2],
  ["V8's own 10", 10, 10],
])(
  "cuts workflow stack traces to %s frames (workflowStackFrames): the stack trace query's, a promise's at most that",
  async (_name, workflowStackFrames, frames) => {
    const stack = await startTestWorker(suite.servers, workflowStackFrames ? { workflowStackFrames } : {});
    workers.push(stack);
    const handle = await stack.client.startParallel(tasks('waiting', 2, 2000));
    const workflow = suite.servers.server.client.workflow.getHandle(handle.workflowId);
    // While its calls run: where the fan-out waits.
    let trace = '';
    for (let tries = 0; tries < 50 && !trace.includes('    at '); tries += 1) {
      trace = await workflow.query<string>('__stack_trace');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // The SDK drops the frame of its own promise hook from each trace it takes: one fewer than the limit.
    const lengths = trace
      .split('\n\n')
      .map((promise) => promise.split('\n').filter((line) => line.startsWith('    at ')).length);
    expect(Math.max(...lengths)).toBe(frames - 1);
    await handle.result();
  },
);

it('refuses workflowStackFrames out of 1-100, naming the setting, before the worker starts', async () => {
  await expect(startTestWorker(suite.servers, { workflowStackFrames: 0 })).rejects.toThrow(
    'workflow stack frames (FANOUT_WORKFLOW_STACK_FRAMES) must be a whole number from 1 to 100, got 0',
  );
});

describe("the worker connection's gRPC compression (FANOUT_GRPC_COMPRESSION)", () => {
  it('is off to a server on this machine and gzip to any other, unless set', () => {
    for (const address of ['127.0.0.1:7233', 'localhost:7233', '[::1]:7233', '127.0.1.1:7233'])
      expect([address, grpcCompressionFromEnvironment(address, {})]).toEqual([address, 'none']);
    for (const address of [
      '10.0.0.5:7233',
      'my-ns.a1b2c.tmprl.cloud:7233',
      '[2001:db8::1]:7233',
      'localhost.example:7233',
    ])
      expect([address, grpcCompressionFromEnvironment(address, {})]).toEqual([address, 'gzip']);
    expect(grpcCompressionFromEnvironment('127.0.0.1:7233', { FANOUT_GRPC_COMPRESSION: 'GZIP' })).toBe('gzip');
    expect(grpcCompressionFromEnvironment('10.0.0.5:7233', { FANOUT_GRPC_COMPRESSION: 'none' })).toBe('none');
    expect(() => grpcCompressionFromEnvironment('127.0.0.1:7233', { FANOUT_GRPC_COMPRESSION: 'zstd' })).toThrow(
      'FANOUT_GRPC_COMPRESSION must be "gzip" or "none", got "zstd"',
    );
  });

  it('runs calls over a gzip connection when asked, and a worker given a bad value says so and starts nothing', async () => {
    const taskQueue = uniqueName('tq-gzip');
    const env = { OPENAI_BASE_URL: suite.servers.simulator.baseUrl, OPENAI_API_KEY: 'test-key' };
    const gzip = await spawnWorker({
      address: suite.servers.server.address,
      taskQueue,
      env: { ...env, FANOUT_GRPC_COMPRESSION: 'gzip' },
    });
    try {
      const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
      const { results } = await client.runParallel(tasks('gzip', 3, 10));
      expect(results.map((result) => result.status)).toEqual(['ok', 'ok', 'ok']);
    } finally {
      await gzip.stop();
    }

    const refused = await runCli(['worker', '--address', suite.servers.server.address, '--task-queue', taskQueue], {
      ...env,
      FANOUT_GRPC_COMPRESSION: 'zip',
    });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('FANOUT_GRPC_COMPRESSION must be "gzip" or "none", got "zip"');
    expect(refused.stdout + refused.stderr).not.toContain('worker polling');
  });
});
