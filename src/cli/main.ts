#!/usr/bin/env node
import { heapCapToApply, relaunchWithHeapCap } from './heap-cap';

/**
 * `fanout worker` re-launches itself with a heap cap (src/cli/heap-cap.ts). It does so here, before the CLI and the
 * Temporal SDK are loaded, so the parent that only supervises stays a bare Node process (about 42 MB, not ~85). It
 * loads nothing else, not even the CLI's error module (zod comes with it), unless the re-launch fails.
 */
function relaunchesNow(): boolean {
  const [command, ...rest] = process.argv.slice(2);
  return (
    command === 'worker' &&
    !rest.some((argument) => argument === '--help' || argument === '-h') &&
    heapCapToApply() !== undefined
  );
}

async function main(): Promise<void> {
  try {
    if (relaunchesNow()) {
      await relaunchWithHeapCap();
      return;
    }
  } catch (error) {
    process.exitCode = (await import('./errors')).reportError(error);
    return;
  }
  (await import('./run-program')).runProgram();
}

void main();
