import { existsSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';

/** Resolves once `child` has exited (at once if it already has). */
export function exitOf(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
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
