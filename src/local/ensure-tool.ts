import { execFileSync } from 'node:child_process';
import path from 'node:path';

/**
 * Path of a tool that one of the package's `scripts/ensure-*.sh` (beside src/ and dist/) finds: the variable naming
 * one, the tool on PATH, or the per-user cache, building it there once (minutes) when none exists. Throws
 * `unavailable`, which says what the user can do, when none can be had (the script's messages above it say why).
 */
export function ensureTool(script: string, unavailable: string): string {
  try {
    return execFileSync('bash', [path.resolve(__dirname, '../../scripts', script)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }).trim();
  } catch {
    throw new Error(unavailable);
  }
}
