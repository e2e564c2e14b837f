import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { startDevServer, type DevServer } from '../../src/local/dev-server';

/** Set by global-setup.ts: where each jest worker's dev server listens (JSON, one entry per worker). */
export const SHARED_DEV_SERVERS = 'FANOUT_TEST_DEV_SERVERS';

interface SharedDevServerAddress {
  address: string;
  uiUrl: string;
}

/** The dev servers of a run, as jest's parent process holds them. */
export interface SharedDevServers {
  /** Where they listen, once every one serves. */
  ready: Promise<SharedDevServerAddress[]>;
  stop(): Promise<void>;
}

/** Starts `count` dev servers side by side, one for each jest worker (global-setup.ts). */
export function startSharedDevServers(count: number): SharedDevServers {
  const starting = Array.from({ length: count }, () => startDevServer());
  const ready = Promise.all(starting).then((servers) => servers.map(({ address, uiUrl }) => ({ address, uiUrl })));
  // Whoever awaits `ready` hears of a failure; this copy only keeps it from being reported as unhandled.
  ready.catch(() => undefined);
  return {
    ready,
    stop: async () => {
      await Promise.all(
        starting.map((server) =>
          server.then(
            (started) => started.stop(),
            () => undefined,
          ),
        ),
      );
    },
  };
}

/**
 * This jest worker's dev server, with connections of the calling test file's own, or undefined outside a run that
 * started them. The files of one worker run one after the other on it, each on task queues and workflow ids of its own;
 * `stop()` closes the file's connections and leaves the server to the next file. A file that stops, kills or
 * configures its server starts one of its own instead.
 */
export async function connectSharedDevServer(): Promise<DevServer | undefined> {
  const listed = process.env[SHARED_DEV_SERVERS];
  if (!listed) return undefined;
  const servers = JSON.parse(listed) as SharedDevServerAddress[];
  const { address, uiUrl } = servers[(Number(process.env.JEST_WORKER_ID ?? '1') - 1) % servers.length];
  const namespace = 'default';
  const connection = await Connection.connect({ address });
  const nativeConnection = await NativeConnection.connect({ address });
  return {
    address,
    uiUrl,
    namespace,
    client: new Client({ connection, namespace }),
    nativeConnection,
    stop: async () => {
      await connection.close();
      await nativeConnection.close();
    },
    kill: () =>
      Promise.reject(new Error('the shared dev server is not to be killed: start one of its own (startDevServer)')),
  };
}
