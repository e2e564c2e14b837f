import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { processAlive } from './process-alive';

/** What dist/ is built from: a change to any of them rebuilds it. */
const INPUTS = ['src', 'tsconfig.json', 'tsconfig.build.json', 'scripts/bundle-workflows.js', 'package-lock.json'];
/** Written into dist/ last: the digest of the inputs it was built from. */
const STAMP = '.built-from';
/** Staging and retired builds, beside dist/ so that a rename moves them (.gitignore, eslint and prettier skip them). */
const SCRATCH_PREFIX = '.dist-';

function filesUnder(root: string, entry: string): string[] {
  const full = path.join(root, entry);
  if (!existsSync(full)) return [];
  if (!statSync(full).isDirectory()) return [entry];
  return readdirSync(full, { withFileTypes: true, recursive: true })
    .filter((found) => found.isFile())
    .map((found) => path.relative(root, path.join(found.parentPath, found.name)));
}

/** A digest of every input's path and content. */
export function sourceDigest(root: string): string {
  const hash = createHash('sha256');
  for (const file of INPUTS.flatMap((entry) => filesUnder(root, entry)).sort()) {
    hash
      .update(`${file}\0`)
      .update(readFileSync(path.join(root, file)))
      .update('\0');
  }
  return hash.digest('hex');
}

function builtFrom(dist: string): string | undefined {
  try {
    return readFileSync(path.join(dist, STAMP), 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** Holds `lock` (a file naming its owner's pid) while `body` runs; waits for a live owner, takes over from a dead one. */
async function withLock<T>(lock: string, body: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      closeSync(openSync(lock, 'wx'));
      writeFileSync(lock, String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = Number(readFileSync(lock, 'utf8')) || undefined;
      // An owner that has not written its pid yet is alive; one whose pid is gone died holding the lock.
      if (owner !== undefined && !processAlive(owner)) rmSync(lock, { force: true });
      else await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  try {
    return await body();
  } finally {
    unlinkSync(lock);
  }
}

/** Runs a Node script to its end, its output on ours; rejects if it fails. */
function runNode(root: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: 'inherit' });
    child.once('error', reject);
    child.once('exit', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`node ${args.join(' ')} failed (${code ?? signal})`)),
    );
  });
}

/** Scratch directories of builds whose process is gone (killed half-way). */
function removeAbandoned(root: string): void {
  for (const entry of readdirSync(root)) {
    const pid = new RegExp(`^${SCRATCH_PREFIX.replace('.', '\\.')}(?:staging|retired)-(\\d+)-`).exec(entry)?.[1];
    if (pid !== undefined && !processAlive(Number(pid)))
      rmSync(path.join(root, entry), { recursive: true, force: true });
  }
}

/**
 * Makes dist/ a build of the current sources, as `npm run build` would, unless it is one already: compiled without
 * type-checking (`npm run lint` type-checks; `--noCheck` emits what a checked build emits) into a staging directory, then
 * renamed over dist/. dist/ is never rewritten in place, so another suite running from it sees the old build or the new
 * one, never a half-written file; concurrent suites build once (a lock).
 * Returns whether it built.
 */
export async function ensureDistBuilt(root: string): Promise<boolean> {
  const dist = path.join(root, 'dist');
  const digest = sourceDigest(root);
  if (builtFrom(dist) === digest) return false;
  return withLock(path.join(root, `${SCRATCH_PREFIX}build.lock`), async () => {
    if (builtFrom(dist) === digest) return false; // another suite built it while we waited
    removeAbandoned(root);
    const staging = mkdtempSync(path.join(root, `${SCRATCH_PREFIX}staging-${process.pid}-`));
    chmodSync(staging, 0o755); // as a directory tsc creates: dist/ is read by other users (docker, CI caches)
    const retired = path.join(root, `${SCRATCH_PREFIX}retired-${process.pid}-${path.basename(staging).slice(-6)}`);
    try {
      const tsc = require.resolve('typescript/bin/tsc');
      await runNode(root, [tsc, '-p', 'tsconfig.build.json', '--noCheck', '--outDir', staging]);
      await runNode(root, [path.join(root, 'scripts', 'bundle-workflows.js'), staging]);
      chmodSync(path.join(staging, 'cli', 'main.js'), 0o755);
      writeFileSync(path.join(staging, STAMP), `${digest}\n`);
      // Two renames: dist/ is missing for the moment between them, never incomplete.
      if (existsSync(dist)) renameSync(dist, retired);
      renameSync(staging, dist);
    } finally {
      rmSync(staging, { recursive: true, force: true });
      rmSync(retired, { recursive: true, force: true });
    }
    return true;
  });
}
