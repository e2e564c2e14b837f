import { spawn, type ChildProcess } from 'node:child_process';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { grpcCompressionFromEnvironment } from '../config/environment';
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
  /** How long to wait for the server to answer, ms; default 60000 (a cold start with a SQLite file takes a few seconds). */
  startTimeoutMs?: number;
  /**
   * Further dynamic config values (`--dynamic-config-value key=value`, the value as JSON), e.g.
   * `{ 'limit.historyCount.suggestContinueAsNew': 40 }` to make Temporal suggest continue-as-new early. Default none.
   */
  dynamicConfig?: Readonly<Record<string, string | number | boolean>>;
}

/** A running Temporal dev server (the Temporal CLI's `server start-dev`) and connections to it. */
export interface DevServer {
  readonly address: string;
  readonly uiUrl: string;
  readonly namespace: string;
  /** A client on `namespace`, for starting and reading workflows. */
  readonly client: Client;
  /** A connection for workers (`createFanoutWorker({ connection })`). */
  readonly nativeConnection: NativeConnection;
  /** Closes the connections, then stops the server process and waits for it to exit. */
  stop(): Promise<void>;
  /** SIGKILLs the server process, as a crash would, and waits for it to exit (the connections are closed too). */
  kill(): Promise<void>;
}

/** The CLI's `--search-attribute` value type for an SDK search attribute type (KEYWORD_LIST → KeywordList). */
function cliAttributeType(type: string): string {
  return type
    .toLowerCase()
    .split('_')
    .map((word) => word[0].toUpperCase() + word.slice(1))
    .join('');
}

/** The server ended before serving because a port it binds was taken. */
class PortTaken extends Error {}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** SIGTERM, then SIGKILL if the process is still there after `graceMs`. */
async function terminate(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited(child);
  clearTimeout(timer);
}

/**
 * Waits until the server answers DescribeNamespace for `namespace`: the port accepting connections is not enough,
 * the namespace is registered a moment after the frontend starts.
 */
async function waitUntilServing(
  child: ChildProcess,
  address: string,
  namespace: string,
  output: { announced: () => boolean; tail: () => string; closed: Promise<void> },
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await output.closed; // the last of its output may still be in the pipes
      const tail = output.tail();
      const message = `the Temporal dev server exited (${child.exitCode ?? child.signalCode}) before serving:\n${tail}`;
      throw /address already in use/.test(tail) ? new PortTaken(message) : new Error(message);
    }
    // Until our process has announced its address, an answer on the port may come from another server.
    const connection = !output.announced()
      ? undefined
      : await Connection.connect({ address, connectTimeout: 1000 }).catch((error: unknown) => {
          last = error;
          return undefined;
        });
    if (connection) {
      try {
        await connection.workflowService.describeNamespace({ namespace });
        return;
      } catch (error) {
        last = error;
      } finally {
        await connection.close();
      }
    }
    if (Date.now() > deadline) {
      const detail = last instanceof Error ? ` (last error: ${last.message.split('\n')[0]})` : '';
      throw new Error(
        `the Temporal dev server on ${address} did not serve namespace ${namespace} within ${timeoutMs} ms${detail}:\n${output.tail()}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * Starts a local Temporal dev server on 127.0.0.1, with its Web UI and the FanoutName search attribute, as a child
 * process of the Temporal CLI (`temporal server start-dev`), and connects a client and a worker connection to it.
 * The server dies with `stop()`, and with this process if it exits first.
 *
 * @example
 * const server = await startDevServer();
 * const worker = await createFanoutWorker({ connection: server.nativeConnection });
 */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch({
        ...options,
        port: options.port ?? (await freePort()),
        uiPort: options.uiPort ?? (await freePort()),
      });
    } catch (error) {
      // A port free a moment ago can be taken before the server binds it (by another test, or one of the ports the
      // CLI picks itself): start again, on fresh ports where the caller gave none.
      if (!(error instanceof PortTaken) || attempt >= 3) throw error;
    }
  }
}

async function launch(options: DevServerOptions & { port: number; uiPort: number }): Promise<DevServer> {
  const executable = findTemporalCli();
  const { port, uiPort } = options;
  const namespace = options.namespace ?? 'default';
  const address = `127.0.0.1:${port}`;
  // Read before the server starts: a bad FANOUT_GRPC_COMPRESSION is refused with nothing to stop.
  const grpcCompression = { codec: grpcCompressionFromEnvironment(address) };
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--ui-port',
    String(uiPort),
    '--namespace',
    namespace,
    '--search-attribute',
    `${FANOUT_NAME.name}=${cliAttributeType(FANOUT_NAME.type)}`,
    '--log-level',
    'error',
    // The server otherwise asks Temporal's servers for newer versions at start: a network call a local run does not need.
    '--dynamic-config-value',
    'frontend.enableServerVersionCheck=false',
    // Eager activity dispatch (off in the server's defaults): a fan-out's calls go straight back to the worker that
    // scheduled them, without matching and a poll each (see FANOUT_EAGER_ACTIVITIES).
    '--dynamic-config-value',
    'system.enableActivityEagerExecution=true',
    ...Object.entries(options.dynamicConfig ?? {}).flatMap(([key, value]) => [
      '--dynamic-config-value',
      `${key}=${JSON.stringify(value)}`,
    ]),
    ...(options.dbFilename === undefined ? [] : ['--db-filename', options.dbFilename]),
  ];
  const child = spawn(executable, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  // Only the tail is kept, for the error message when the server does not come up; reading the pipes also keeps
  // a chatty server from blocking on a full pipe.
  let output = '';
  let announced = false;
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-8192));
  child.stdout?.on('data', (chunk: Buffer) => {
    keep(chunk);
    // The CLI prints "Server:  localhost:PORT" once its server has started.
    announced ||= /^Server:/m.test(output);
  });
  child.stderr?.on('data', keep);
  // A child is not stopped when its parent exits; this kills it if the caller never reaches stop().
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const spawned = new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });

  let client: Client | undefined;
  let nativeConnection: NativeConnection | undefined;
  const stop = async () => {
    process.removeListener('exit', killOnExit);
    await client?.connection.close();
    await nativeConnection?.close();
    await terminate(child);
  };
  try {
    await spawned;
    await waitUntilServing(
      child,
      address,
      namespace,
      { announced: () => announced, tail: () => output, closed },
      options.startTimeoutMs ?? 60_000,
    );
    client = new Client({ connection: await Connection.connect({ address }), namespace });
    nativeConnection = await NativeConnection.connect({ address, grpcCompression });
  } catch (error) {
    await stop();
    throw error;
  }
  const kill = async () => {
    process.removeListener('exit', killOnExit);
    child.kill('SIGKILL');
    await exited(child);
    await client?.connection.close();
    await nativeConnection?.close();
  };
  return { address, uiUrl: `http://127.0.0.1:${uiPort}`, namespace, client, nativeConnection, stop, kill };
}
