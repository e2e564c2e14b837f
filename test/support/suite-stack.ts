import type { SimulatorConfigInput } from '../../src/sim/config';
import { startSimulator, type Simulator } from '../../src/sim/simulator';
import { spawnWorker, type WorkerProcess } from './processes';
import { startTestServers, startTestWorker, type TestServers, type TestWorker } from './test-stack';

/** What `useTestServers` starts: a dev server and a simulator (options as `startTestServers` takes them). */
export interface TestServersOptions {
  simulator?: NonNullable<Parameters<typeof startTestServers>[0]>['simulator'];
  server?: NonNullable<Parameters<typeof startTestServers>[0]>['server'];
  /** Runs after the tests and before anything is stopped: for what the tests started on top of the servers. */
  beforeStop?: () => Promise<void>;
}

type TestWorkerOptions = NonNullable<Parameters<typeof startTestWorker>[1]>;

/** What `useTestStack` starts: the servers, and a worker in this process (options as `startTestWorker` takes them). */
export interface TestStackOptions extends TestServersOptions {
  /** The worker's options, or a function of the started servers for options that need their addresses. */
  worker?: TestWorkerOptions | ((servers: TestServers) => TestWorkerOptions);
}

function started<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`${what} has not started: read it inside a test or a hook`);
  return value;
}

/**
 * Starts a dev server and a simulator before the tests of the file (or of the `describe` it is called in) and stops
 * them after. They start after the file has loaded, so read them off the returned object inside tests and hooks.
 *
 * @example
 * const suite = useTestServers();
 * it('runs a worker process', async () => spawnWorker({ address: suite.servers.server.address, taskQueue }));
 */
export function useTestServers(options: TestServersOptions = {}): { readonly servers: TestServers } {
  let servers: TestServers | undefined;
  beforeAll(async () => {
    servers = await startTestServers({ simulator: options.simulator, server: options.server });
  });
  afterAll(async () => {
    await options.beforeStop?.();
    await servers?.stop();
  });
  return {
    get servers() {
      return started(servers, 'the test servers');
    },
  };
}

/**
 * `useTestServers` and a worker in this process on a fresh task queue, with a client for it (`stack.client`).
 *
 * @example
 * const suite = useTestStack({ worker: { heartbeatThrottleMs: 500 } });
 * it('runs', async () => expect((await suite.stack.client.runParallel(tasks)).metrics.failed).toBe(0));
 */
export function useTestStack(options: TestStackOptions = {}): {
  readonly servers: TestServers;
  readonly stack: TestWorker;
  /** The `fanout` CLI's flags for this dev server and the worker's task queue. */
  readonly connectionArgs: string[];
} {
  let stack: TestWorker | undefined;
  // The worker stops before the servers do.
  const suite = useTestServers({
    ...options,
    beforeStop: async () => {
      await options.beforeStop?.();
      await stack?.stop();
    },
  });
  beforeAll(async () => {
    const worker = typeof options.worker === 'function' ? options.worker(suite.servers) : options.worker;
    stack = await startTestWorker(suite.servers, worker);
  });
  return {
    get servers() {
      return suite.servers;
    },
    get stack() {
      return started(stack, 'the test worker');
    },
    get connectionArgs() {
      return ['--address', suite.servers.server.address, '--task-queue', started(stack, 'the test worker').taskQueue];
    },
  };
}

/** What a `fanout worker` process needs to call the simulator: its OpenAI and Anthropic endpoints and keys. */
export function simulatorEnvironment(simulator: Simulator): Record<string, string> {
  return {
    OPENAI_BASE_URL: simulator.baseUrl,
    OPENAI_API_KEY: 'test-key',
    ANTHROPIC_BASE_URL: simulator.anthropicBaseUrl,
    ANTHROPIC_API_KEY: 'test-key',
  };
}

/**
 * Lost-worker detection in seconds rather than the defaults' tens (FANOUT_LOST_WORKER_MS 15000, FANOUT_SWEEP_INTERVAL_MS
 * 10000), for the worker processes of crash tests that are not about those defaults: a SIGKILLed worker's calls are
 * retried some 6-7 s after the kill instead of 15-25 s. At this threshold a presence poll lasts 1.5 s (its deadline is
 * the shortest the server takes, 2.5 s: `presencePollMs`), so a live worker is never taken for lost: the peers compare
 * last polls, each up to a poll old, and the 4 s left over are what 8000 left over 5 s polls (4 s long) before. A
 * killed worker's runs wait 3 s for their next workflow task on its sticky queue instead of the SDK's 10 s (a live
 * worker slower than that only costs a replay elsewhere).
 */
export const QUICK_LOST_WORKER_DETECTION: Readonly<Record<string, string>> = {
  FANOUT_LOST_WORKER_MS: '5500',
  FANOUT_SWEEP_INTERVAL_MS: '1000',
  FANOUT_STICKY_QUEUE_TIMEOUT_MS: '3000',
};

/**
 * `useTestServers` and `fanout worker` processes on top: `spawnWorker` starts one on `taskQueue` that calls the
 * simulator (`simulatorEnvironment`, plus `options.env`, plus `env`). Each is stopped after the test that started it, so
 * that a test's workers do not go on polling and working through the tests after it.
 *
 * @example
 * const suite = useWorkerProcesses({ env: QUICK_LOST_WORKER_DETECTION });
 * it('survives a SIGKILL', async () => (await suite.spawnWorker(taskQueue)).kill());
 */
export function useWorkerProcesses(options: TestServersOptions & { env?: Readonly<Record<string, string>> } = {}): {
  readonly servers: TestServers;
  spawnWorker(taskQueue: string, env?: Record<string, string>): Promise<WorkerProcess>;
} {
  const workers: WorkerProcess[] = [];
  const stopWorkers = async () => {
    for (const worker of workers.splice(0)) await worker.stop();
  };
  afterEach(stopWorkers);
  const suite = useTestServers({
    ...options,
    beforeStop: async () => {
      await options.beforeStop?.();
      // Those started in a hook of the file rather than in a test.
      await stopWorkers();
    },
  });
  return {
    get servers() {
      return suite.servers;
    },
    async spawnWorker(taskQueue, env = {}) {
      const { server, simulator } = suite.servers;
      const worker = await spawnWorker({
        address: server.address,
        taskQueue,
        env: { ...simulatorEnvironment(simulator), ...options.env, ...env },
      });
      workers.push(worker);
      return worker;
    },
  };
}

/**
 * A simulator per call, each with `defaults` under its own `config`, all closed after the tests of the file (or of the
 * `describe` it is called in).
 *
 * @example
 * const simulator = useSimulators({ latency: { minMs: 0, maxMs: 0 } });
 * it('limits', async () => expect((await simulator({ rateLimits: { requestsPerMinute: 60 } })).baseUrl).toBeTruthy());
 */
export function useSimulators(
  defaults: SimulatorConfigInput = {},
): (config?: SimulatorConfigInput) => Promise<Simulator> {
  const simulators: Simulator[] = [];
  afterAll(async () => {
    for (const simulator of simulators) await simulator.close();
  });
  return async (config = {}) => {
    const simulator = await startSimulator({ ...defaults, ...config });
    simulators.push(simulator);
    return simulator;
  };
}
