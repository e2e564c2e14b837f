#!/usr/bin/env node
import { reportError } from './errors';
import { heapCapToApply, relaunchWithHeapCap } from './heap-cap';

/**
 * `fanout worker` re-launches itself with a heap cap (src/cli/heap-cap.ts). It does so here, before the CLI and the
 * Temporal SDK are loaded, so the parent that only supervises stays a bare Node process (tens of MB, not ~85).
 */
function relaunchesNow(): boolean {
  const [command, ...rest] = process.argv.slice(2);
  return command === 'worker' && !rest.some((argument) => argument === '--help' || argument === '-h') && heapCapToApply() !== undefined;
}

async function main(): Promise<void> {
  try {
    if (relaunchesNow()) {
      await relaunchWithHeapCap();
      return;
    }
  } catch (error) {
    process.exitCode = reportError(error);
    return;
  }
  (await import('./run-program')).runProgram();
}

void main();
