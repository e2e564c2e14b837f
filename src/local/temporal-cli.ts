import { execFileSync } from 'node:child_process';
import path from 'node:path';

/** The script that finds or builds the Temporal CLI; it lives in the package, beside src/ and dist/. */
export const ENSURE_TEMPORAL_SCRIPT = path.resolve(__dirname, '../../scripts/ensure-temporal.sh');

/**
 * Path of a Temporal CLI binary: $TEMPORAL_CLI, a `temporal` on PATH, or the per-user cache, building it
 * there once (a few minutes) when none exists. Throws with the user's options when none can be had.
 */
export function findTemporalCli(): string {
  try {
    return execFileSync('bash', [ENSURE_TEMPORAL_SCRIPT], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }).trim();
  } catch {
    throw new Error(
      'no Temporal CLI is available (see the messages above); set TEMPORAL_CLI to one, or use docker compose',
    );
  }
}
