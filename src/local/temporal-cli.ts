import { ensureTool } from './ensure-tool';

/**
 * Path of a Temporal CLI binary: $TEMPORAL_CLI, a `temporal` on PATH, or the per-user cache, building it
 * there once (a few minutes) when none exists. Throws with the user's options when none can be had.
 */
export function findTemporalCli(): string {
  return ensureTool(
    'ensure-temporal.sh',
    'no Temporal CLI is available (see the messages above); set TEMPORAL_CLI to one, or use docker compose',
  );
}
