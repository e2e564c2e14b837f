/**
 * A process the benchmarks start and wait for (a `fanout worker`, a plain SDK worker): spawned with `node`, ready once
 * its stderr says so (`worker polling` for a fanout worker), SIGKILLed if the benchmark exits before stopping it.
 */
import { spawn, type ChildProcess } from 'node:child_process';

export interface ReadyProcess {
  child: ChildProcess;
  pid: number;
  /** SIGTERM (SIGKILL 15 s later if it is still there), resolved once it has exited. */
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => running.forEach((child) => child.kill('SIGKILL')));

/** The arguments after `node` of a `fanout worker` of `cli` (dist/cli/main.js or another build's) on `taskQueue`. */
export function fanoutWorkerArgs(cli: string, address: string, taskQueue: string): string[] {
  return [cli, 'worker', '--address', address, '--task-queue', taskQueue];
}

/**
 * Starts `node ...args` with `env` (the whole environment) and waits until its stderr matches `ready`; every chunk of
 * its stderr also goes to `onStderr` (a log file).
 */
export async function startReady(
  label: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  { ready = /worker polling/, onStderr }: { ready?: RegExp; onStderr?: (chunk: Buffer) => void } = {},
): Promise<ReadyProcess> {
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
  running.add(child);
  child.once('exit', () => running.delete(child));
  let output = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      onStderr?.(chunk);
      output = (output + chunk.toString()).slice(-4000);
      if (ready.test(output)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`${label} exited with ${code} before it was ready:\n${output}`)));
  });
  child.removeAllListeners('exit');
  child.once('exit', () => running.delete(child));
  return {
    child,
    pid: child.pid as number,
    stop: () => stopChild(child),
  };
}

/** SIGTERM, then SIGKILL 15 s later if it is still there; resolved once it has exited. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(killer);
}
