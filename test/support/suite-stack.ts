import { startTestServers, startTestWorker, type TestServers, type TestWorker } from './test-stack';

/** What `useTestServers` starts: a dev server and a simulator (options as `startTestServers` takes them). */
export interface TestServersOptions {
  simulator?: NonNullable<Parameters<typeof startTestServers>[0]>['simulator'];
  server?: NonNullable<Parameters<typeof startTestServers>[0]>['server'];
  /** Runs after the tests and before anything is stopped: for what the tests started on top of the servers. */
  beforeStop?: () => Promise<void>;
}

/** What `useTestStack` starts: the servers, and a worker in this process (options as `startTestWorker` takes them). */
export interface TestStackOptions extends TestServersOptions {
  worker?: Parameters<typeof startTestWorker>[1];
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
    stack = await startTestWorker(suite.servers, options.worker);
  });
  return {
    get servers() {
      return suite.servers;
    },
    get stack() {
      return started(stack, 'the test worker');
    },
  };
}
