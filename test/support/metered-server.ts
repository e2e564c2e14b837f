import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { freePort } from '../../src/local/free-port';

/**
 * A Temporal dev server with its Prometheus endpoint on (`--metrics-port`), whose `action` counter counts what Temporal
 * Cloud bills: workflow starts, activity starts and retries, heartbeats that reach the server, queries, signals...
 * Started here rather than through src/local/dev-server.ts, which does not expose the metrics port.
 */
export interface MeteredServer {
  readonly address: string;
  readonly client: Client;
  readonly nativeConnection: NativeConnection;
  /** The `action` counter of the user namespace, by action type. */
  actions(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

/** Sums a counter's samples in Prometheus text, by one label, leaving out Temporal's own system namespace. */
export function countersByLabel(text: string, metric: string, label: string): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    const match = /^[^{]+\{(.*)\} (\S+)$/.exec(line);
    if (!match || match[1].includes('namespace="temporal_system"')) continue;
    const value = new RegExp(`${label}="([^"]*)"`).exec(match[1])?.[1] ?? '';
    totals[value] = (totals[value] ?? 0) + Number(match[2]);
  }
  return totals;
}

/** Total of a by-type count, or of its difference from an earlier one. */
export function total(counts: Record<string, number>, since: Record<string, number> = {}): number {
  return Object.entries(counts).reduce((sum, [key, value]) => sum + value - (since[key] ?? 0), 0);
}

/** The server's action counter once it has stopped moving (the last actions land a moment after a run closes). */
export async function settledActions(server: MeteredServer): Promise<Record<string, number>> {
  let previous = await server.actions();
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const current = await server.actions();
    if (total(current, previous) === 0) return current;
    previous = current;
  }
}

export function difference(counts: Record<string, number>, since: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(counts)
      .map(([key, value]) => [key, value - (since[key] ?? 0)])
      .filter(([, value]) => value !== 0),
  );
}

function temporalCli(): string {
  return (
    process.env.TEMPORAL_CLI ??
    execFileSync('bash', [path.resolve(__dirname, '../../scripts/ensure-temporal.sh')], { encoding: 'utf8' }).trim()
  );
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export async function startMeteredServer(): Promise<MeteredServer> {
  const [port, metricsPort] = [await freePort(), await freePort()];
  const address = `127.0.0.1:${port}`;
  const child = spawn(
    temporalCli(),
    [
      'server',
      'start-dev',
      '--headless',
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--metrics-port',
      String(metricsPort),
      '--search-attribute',
      'FanoutName=Keyword',
      '--log-level',
      'error',
      '--dynamic-config-value',
      'frontend.enableServerVersionCheck=false',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let output = '';
  child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4096)));
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const deadline = Date.now() + 60_000;
  let connection: Connection | undefined;
  while (!connection) {
    if (child.exitCode !== null) throw new Error(`temporal server start-dev exited: ${output}`);
    if (Date.now() > deadline) throw new Error(`temporal server start-dev did not serve within 60 s: ${output}`);
    try {
      const candidate = await Connection.connect({ address, connectTimeout: 1000 });
      await candidate.workflowService.describeNamespace({ namespace: 'default' });
      connection = candidate;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  const client = new Client({ connection });
  const nativeConnection = await NativeConnection.connect({ address });
  return {
    address,
    client,
    nativeConnection,
    actions: async () =>
      countersByLabel(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text(), 'action', 'action_type'),
    stop: async () => {
      process.removeListener('exit', killOnExit);
      await connection?.close();
      await nativeConnection.close();
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited(child);
      clearTimeout(timer);
    },
  };
}
