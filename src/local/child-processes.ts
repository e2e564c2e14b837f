import { existsSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';

/** Resolves once `child` has exited (at once if it already has). */
export function exitOf(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/**
 * Polls `check` until it returns true, failing after `timeoutMs` with `what` and the last error `check` threw.
 * A check that throws a `FatalWaitError` stops the wait at once (a process that exited will not recover).
 */
export async function pollUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  { timeoutMs = 30_000, intervalMs = 100 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (error) {
      if (error instanceof FatalWaitError) throw error.cause;
      last = error;
    }
    if (Date.now() > deadline) {
      const detail = last instanceof Error ? ` (last error: ${last.message.split('\n')[0]})` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Thrown inside a `pollUntil` check to stop waiting: the condition can no longer come true. */
export class FatalWaitError extends Error {
  constructor(override readonly cause: Error) {
    super(cause.message);
    this.name = 'FatalWaitError';
  }
}

let setprivPath: string | undefined | null = null;

/**
 * `command args` prefixed, where util-linux's setpriv exists, so the child gets `signal` when this process dies.
 * A test run killed by its runner (SIGKILL never runs exit handlers) would otherwise leave servers running that hold
 * ports, CPU and a temporary directory on a shared machine.
 */
export function diesWithParent(command: string, args: string[], signal: 'TERM' | 'INT'): [string, string[]] {
  if (setprivPath === null) {
    setprivPath = ['/usr/bin/setpriv', '/bin/setpriv'].find((candidate) => existsSync(candidate));
  }
  return setprivPath ? [setprivPath, ['--pdeathsig', signal, '--', command, ...args]] : [command, args];
}
