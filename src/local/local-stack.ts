import { Client } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { createLlmClient, OPENAI_BASE_URL, providerFromEnvironment } from '../llm/llm-client';
import { FanoutClient } from '../client/fanout-client';
import { dataConverterFromEnvironment } from '../codec';
import type { SimulatorConfigInput } from '../sim/config';
import { startSimulator, type Simulator } from '../sim/simulator';
import { createFanoutWorker } from '../worker';
import { tracingClientInterceptor } from '../client/tracing-interceptor';
import { startDevServer, type DevServer, type DevServerOptions } from './dev-server';

export interface LocalStackOptions extends DevServerOptions {
  /** Simulator configuration; pass `false` to call the provider in OPENAI_BASE_URL / OPENAI_API_KEY instead. */
  simulator?: SimulatorConfigInput | false;
  taskQueue?: string;
}

/** A dev server, a worker running in this process, and (unless told otherwise) the simulator. */
export interface LocalStack {
  readonly server: DevServer;
  readonly simulator: Simulator | undefined;
  readonly worker: Worker;
  readonly client: FanoutClient;
  /** Where agents are sent. */
  readonly providerUrl: string;
  /** Runs the worker until `stop()`. */
  readonly running: Promise<void>;
  stop(): Promise<void>;
}

/** Starts everything a local run needs: the embedded default of `fanout demo` and `fanout dev`. */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const server = await startDevServer(options);
  const simulator = options.simulator === false ? undefined : await startSimulator(options.simulator ?? {});
  const taskQueue = options.taskQueue ?? 'fanout';
  try {
    const llm = simulator ? createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'simulator' }) : createLlmClient();
    // No shutdown grace: the server stops with the worker, so no other worker could take the calls over.
    const worker = await createFanoutWorker({
      connection: server.nativeConnection,
      taskQueue,
      activities: { llm },
      shutdownGraceMs: 0,
    });
    const running = worker.run();
    // The worker encrypts when FANOUT_ENCRYPTION_KEYS is set; the dev server's own client would then not read results.
    const dataConverter = dataConverterFromEnvironment();
    const client = await FanoutClient.connect({
      client: new Client({
        connection: server.client.connection,
        namespace: server.namespace,
        ...(dataConverter ? { dataConverter } : {}),
        // Traced (`fanout demo --trace`), a run's trace starts at the client, as FanoutClient.connect's does.
        interceptors: { workflow: [tracingClientInterceptor()] },
      }),
      taskQueue,
    });
    return {
      server,
      simulator,
      worker,
      client,
      providerUrl: simulator?.baseUrl ?? providerFromEnvironment().baseURL ?? OPENAI_BASE_URL,
      running,
      stop: async () => {
        if (worker.getState() === 'RUNNING') worker.shutdown();
        await running;
        await simulator?.close();
        await server.stop();
      },
    };
  } catch (error) {
    await simulator?.close();
    await server.stop();
    throw error;
  }
}
