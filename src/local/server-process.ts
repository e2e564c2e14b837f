import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createConnection } from 'node:net';
import path from 'node:path';
import { Connection, type TLSConfig } from '@temporalio/client';
import { diesWithParent, exitOf } from './child-processes';
import type { ClusterPorts } from './cluster-config';
import { FatalWaitError, waitFor } from './wait-for';

const SERVER_START_TIMEOUT_MS = 90_000;

/** A cluster's `temporal-server` process (cluster.ts): its log goes to `temporal-server.log` in its directory. */
export interface ServerProcess {
  readonly child: ChildProcess;
  exited(): boolean;
  /** The end of the server's log, for error messages. */
  logTail(): string;
  stop(signal: 'SIGTERM' | 'SIGKILL'): Promise<void>;
}

export function startServerProcess(install: string, directory: string): ServerProcess {
  const [command, args] = diesWithParent(
    path.join(install, 'temporal-server'),
    ['--root', directory, '--config', 'config', '--env', 'cluster', '--allow-no-auth', 'start'],
    'TERM',
  );
  const child = spawn(command, args, { cwd: directory, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = createWriteStream(path.join(directory, 'temporal-server.log'), { flags: 'a' });
  let tail = '';
  const record = (chunk: Buffer) => {
    log.write(chunk);
    tail = (tail + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', record);
  child.stderr?.on('data', record);
  const exit = exitOf(child).then(() => new Promise<void>((resolve) => log.end(resolve)));
  return {
    child,
    exited: () => child.exitCode !== null || child.signalCode !== null,
    logTail: () => tail,
    stop: async (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      // The server drains its services on SIGTERM; one that hangs is killed rather than waited on forever.
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exit;
      clearTimeout(timer);
    },
  };
}

function portAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Resolves once the frontend answers its health check. Waits for the port first: a gRPC channel that dials too early
 * backs off for seconds between retries, while the server takes about as long to bind.
 */
export async function waitUntilServing(
  server: ServerProcess,
  ports: ClusterPorts,
  address: string,
  tls: TLSConfig | undefined,
): Promise<void> {
  const alive = () => {
    if (server.exited()) {
      throw new FatalWaitError(
        new Error(`temporal-server exited during start-up (code ${server.child.exitCode}): ${server.logTail().trim()}`),
      );
    }
  };
  const deadline = Date.now() + SERVER_START_TIMEOUT_MS;
  await waitFor(
    `temporal-server to listen on ${address}`,
    async () => {
      alive();
      return portAccepts(ports.frontend);
    },
    { timeoutMs: SERVER_START_TIMEOUT_MS },
  );
  // Lazy: a connect() that meets a server dying during start-up would wait out its own 10 s deadline.
  const connection = Connection.lazy({ address, tls });
  try {
    await waitFor(
      `temporal-server on ${address} to serve`,
      async () => {
        alive();
        const response = await connection.withDeadline(Date.now() + 2_000, () =>
          connection.healthService.check({ service: 'temporal.api.workflowservice.v1.WorkflowService' }),
        );
        // 1 is SERVING in grpc.health.v1.
        return response.status === 1;
      },
      { timeoutMs: Math.max(deadline - Date.now(), 1_000), intervalMs: 250 },
    );
  } finally {
    await connection.close();
  }
}
