import { randomUUID } from 'node:crypto';
import type { Worker } from '@temporalio/worker';
import { createAnthropicClient, createLlmClient } from '../../src/llm/llm-client';
import { FanoutClient } from '../../src/client/fanout-client';
import { startDevServer, type DevServer, type DevServerOptions } from '../../src/local/dev-server';
import type { SimulatorConfigInput } from '../../src/sim/config';
import { startSimulator, type Simulator } from '../../src/sim/simulator';
import { createFanoutWorker, type FanoutWorkerOptions } from '../../src/worker';
import { connectSharedDevServer } from './shared-dev-server';

/** A dev server and a simulator of the test file's own (the server shared with the jest worker's other files). */
export interface TestServers {
  server: DevServer;
  simulator: Simulator;
  stop(): Promise<void>;
}

/**
 * A simulator, and the jest worker's dev server (`connectSharedDevServer`): a server of the file's own when `server`
 * options are given (or outside a jest run). `stop()` closes the simulator and the file's connections to the server.
 */
export async function startTestServers(
  options: { simulator?: SimulatorConfigInput; server?: DevServerOptions } = {},
): Promise<TestServers> {
  const server =
    (options.server === undefined ? await connectSharedDevServer() : undefined) ??
    (await startDevServer(options.server));
  const simulator = await startSimulator(options.simulator ?? {});
  return {
    server,
    simulator,
    stop: async () => {
      await simulator.close();
      await server.stop();
    },
  };
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** A worker in this process on a fresh task queue, and a client for that queue. */
export interface TestWorker {
  taskQueue: string;
  worker: Worker;
  client: FanoutClient;
  stop(): Promise<void>;
}

export async function startTestWorker(
  servers: TestServers,
  options: Omit<FanoutWorkerOptions, 'connection' | 'taskQueue'> & { apiKey?: string } = {},
): Promise<TestWorker> {
  const taskQueue = uniqueName('tq');
  const { apiKey, ...workerOptions } = options;
  const worker = await createFanoutWorker({
    ...workerOptions,
    connection: servers.server.nativeConnection,
    taskQueue,
    activities: {
      llm: createLlmClient({ baseURL: servers.simulator.baseUrl, apiKey: apiKey ?? 'test-key' }),
      anthropic: createAnthropicClient({ baseURL: servers.simulator.anthropicBaseUrl, apiKey: apiKey ?? 'test-key' }),
      ...workerOptions.activities,
    },
  });
  const running = worker.run();
  const client = await FanoutClient.connect({ client: servers.server.client, taskQueue });
  return {
    taskQueue,
    worker,
    client,
    stop: async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
    },
  };
}
