import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { processAlive } from './process-alive';

const PREFIX = 'temporal-fanout-test-';

/** A directory for everything one test run writes, and the environment that sends it there. */
export interface RunDirectory {
  readonly path: string;
  readonly environment: Record<string, string>;
  remove(): void;
}

/**
 * Creates the run's directory under the system's temporary directory (first removing those of runs that were killed
 * before their teardown). Its environment points TMPDIR and XDG_DATA_HOME (where the payload store is by default) into
 * it, so the temporary files of the tests and of every process they start, and their stores, go when it is removed.
 */
export function createRunDirectory(): RunDirectory {
  const system = os.tmpdir();
  for (const entry of readdirSync(system)) {
    const pid = new RegExp(`^${PREFIX}(\\d+)-`).exec(entry)?.[1];
    if (pid !== undefined && Number(pid) !== process.pid && !processAlive(Number(pid)))
      rmSync(path.join(system, entry), { recursive: true, force: true });
  }
  const directory = mkdtempSync(path.join(system, `${PREFIX}${process.pid}-`));
  // PostgreSQL (test/cluster.test.ts) runs as its own account and must reach its data directory inside this one.
  chmodSync(directory, 0o755);
  const temporary = path.join(directory, 'tmp');
  const data = path.join(directory, 'data');
  mkdirSync(temporary, { mode: 0o755 });
  mkdirSync(data, { mode: 0o755 });
  return {
    path: directory,
    environment: {
      TMPDIR: temporary,
      XDG_DATA_HOME: data,
      // The screenshots are for people to look at after the run: they stay where CONTRIBUTING.md says.
      FANOUT_TEST_SYSTEM_TMPDIR: system,
    },
    remove: () => rmSync(directory, { recursive: true, force: true }),
  };
}
