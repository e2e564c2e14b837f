import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** A temporary directory for one benchmark's files, removed when the process exits (however it ends, short of a kill). */
export function scratchDirectory(prefix: string): string {
  const directory = mkdtempSync(path.join(os.tmpdir(), prefix));
  process.once('exit', () => rmSync(directory, { recursive: true, force: true }));
  return directory;
}
