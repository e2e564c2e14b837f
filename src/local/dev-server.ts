import { TestWorkflowEnvironment } from '@temporalio/testing';
import { FANOUT_NAME } from '../contract/search-attributes';
import { freePort } from './free-port';
import { findTemporalCli } from './temporal-cli';

export interface DevServerOptions {
  /** gRPC port; default a free one. */
  port?: number;
  /** Web UI port; default a free one. */
  uiPort?: number;
  /** SQLite file that keeps the server's state across restarts; default in memory. */
  dbFilename?: string;
  namespace?: string;
}

/** A running Temporal dev server (the Temporal CLI's `server start-dev`) and connections to it. */
export interface DevServer {
  readonly address: string;
  readonly uiUrl: string;
  readonly namespace: string;
  readonly environment: TestWorkflowEnvironment;
  stop(): Promise<void>;
}

/**
 * Starts a local Temporal dev server on 127.0.0.1, with its Web UI, through Temporal's own testing package
 * (which owns the process and stops it on `stop()`).
 */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  const executable = findTemporalCli();
  const port = options.port ?? (await freePort());
  const uiPort = options.uiPort ?? (await freePort());
  const namespace = options.namespace ?? 'default';
  const environment = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: executable },
      ip: '127.0.0.1',
      port,
      ui: true,
      uiPort,
      namespace,
      dbFilename: options.dbFilename,
      log: { format: 'pretty', level: 'error' },
      searchAttributes: [FANOUT_NAME],
    },
  });
  return {
    address: `127.0.0.1:${port}`,
    uiUrl: `http://127.0.0.1:${uiPort}`,
    namespace,
    environment,
    stop: () => environment.teardown(),
  };
}
