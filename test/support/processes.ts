import { spawn, type ChildProcess } from 'node:child_process';
import { CLI } from './paths';
import { waitFor } from './wait-for';

/** A `fanout worker` running as its own process, as in production. */
export interface WorkerProcess {
  readonly child: ChildProcess;
  output(): string;
  /** SIGKILL: no shutdown, no goodbye to the server. */
  kill(): Promise<void>;
  /** SIGTERM and wait for a graceful exit. */
  stop(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export async function spawnWorker(options: {
  address: string;
  taskQueue: string;
  env?: Record<string, string>;
  cwd?: string;
  /** More arguments of `fanout worker`. */
  args?: string[];
}): Promise<WorkerProcess> {
  let output = '';
  const child = spawn(
    process.execPath,
    [CLI, 'worker', '--address', options.address, '--task-queue', options.taskQueue, ...(options.args ?? [])],
    {
      env: { ...process.env, ...options.env },
      ...(options.cwd ? { cwd: options.cwd } : {}),
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await waitFor('the worker process to start polling', () => {
    if (child.exitCode !== null) throw new Error(`worker exited with ${child.exitCode}: ${output}`);
    return output.includes('worker polling');
  });
  return {
    child,
    output: () => output,
    kill: async () => {
      child.kill('SIGKILL');
      await exited(child);
    },
    stop: async () => {
      child.kill('SIGTERM');
      await exited(child);
    },
  };
}

/** A `fanout` command running: what it has printed so far, and its end. */
export interface CliProcess {
  output(): string;
  /** What it has printed on stderr so far. */
  errors(): string;
  /** Sends the command `signal` (as a terminal's Ctrl-C sends SIGINT). */
  signal(signal: NodeJS.Signals): void;
  readonly done: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

/** Starts the `fanout` CLI, for a test that waits on what it prints before its end (a `--watch`). */
export function startCli(args: string[], env: Record<string, string> = {}): CliProcess {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return {
    output: () => stdout,
    errors: () => stderr,
    signal: (signal) => child.kill(signal),
    done: new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr }))),
  };
}

/** Runs the `fanout` CLI to its end and returns what it printed and its exit code. */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return startCli(args, env).done;
}

/** Runs `fanout batch start <source> --out <out>` and `flags` to its end. */
export function runBatchStart(
  source: string,
  out: string,
  flags: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runCli(['batch', 'start', source, '--out', out, ...flags]);
}
