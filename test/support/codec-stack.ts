import { spawn, type ChildProcess } from 'node:child_process';
import { Connection } from '@temporalio/client';
import { freePort } from '../../src/local/free-port';
import { findTemporalCli } from '../../src/local/temporal-cli';
import { CLI } from './paths';
import { waitFor } from './wait-for';

/** A child process whose output is kept, and a way to stop it and wait for its exit. */
export interface RunningProcess {
  readonly child: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

function track(child: ChildProcess): RunningProcess {
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-65_536)));
  child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-65_536)));
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  return {
    child,
    output: () => output,
    stop: async () => {
      process.removeListener('exit', killOnExit);
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** `fanout codec-server` as its own process (port chosen by the OS), once it says where it listens. */
export async function spawnCodecServer(
  args: string[],
  env: Record<string, string>,
): Promise<RunningProcess & { url: string }> {
  const running = track(
    spawn(process.execPath, [CLI, 'codec-server', '--port', '0', ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  const url = await waitFor('the codec server to listen', () => {
    if (running.child.exitCode !== null)
      throw new Error(`codec-server exited with ${running.child.exitCode}: ${running.output()}`);
    return /codec server listening: (http:\/\/\S+)/.exec(running.output())?.[1];
  });
  return { ...running, url };
}

/**
 * A Temporal dev server whose Web UI decodes payloads through a codec server (`--ui-codec-endpoint`). The UI port is
 * chosen up front because the codec server must allow the UI's origin before either starts.
 */
export async function spawnDevServerWithCodec(options: {
  uiPort: number;
  codecEndpoint: string;
}): Promise<RunningProcess & { address: string; uiUrl: string }> {
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const running = track(
    spawn(
      findTemporalCli(),
      [
        'server',
        'start-dev',
        '--ip',
        '127.0.0.1',
        '--port',
        String(port),
        '--ui-port',
        String(options.uiPort),
        '--ui-codec-endpoint',
        options.codecEndpoint,
        '--log-level',
        'error',
        '--dynamic-config-value',
        'frontend.enableServerVersionCheck=false',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    ),
  );
  try {
    await waitFor(
      'the dev server to serve namespace default',
      async () => {
        if (running.child.exitCode !== null)
          throw new Error(`the dev server exited with ${running.child.exitCode}: ${running.output()}`);
        const connection = await Connection.connect({ address, connectTimeout: 1000 });
        try {
          await connection.workflowService.describeNamespace({ namespace: 'default' });
          return true;
        } finally {
          await connection.close();
        }
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  } catch (error) {
    await running.stop();
    throw error;
  }
  return { ...running, address, uiUrl: `http://127.0.0.1:${options.uiPort}` };
}

/** Runs the plain Temporal CLI (no config file or environment profile) to its end. */
export function runTemporalCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      findTemporalCli(),
      [...args, '--disable-config-file', '--disable-config-env', '--color', 'never'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
