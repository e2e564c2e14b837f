import type { RunHandle } from '../client/fanout-client';
import type { AgentResult } from '../contract/agent-task';
import { CliError, ExitCode } from './errors';
import { formatRunReport } from './report';

/** A run's result as far as printing goes: a batch's summary has neither `results` nor `metrics`. */
type PrintableResult = {
  results?: AgentResult[];
  synthesis?: AgentResult;
  metrics?: { succeeded: number; total: number };
};

/** How a run ends that returns no result: cancelled, terminated or timed out, as Temporal's status names it. */
const ENDED_WITHOUT_RESULT = new Set(['CANCELLED', 'TERMINATED', 'TIMED_OUT']);

/**
 * The error to report for a run whose result could not be read: a run that was cancelled, terminated or timed out is
 * a run whose agents did not all succeed (exit 1, as `fanout results` says of it), named with how far it got; anything
 * else is reported as it is.
 */
export async function runEndedError(handle: RunHandle<unknown>, error: unknown): Promise<unknown> {
  const status = await handle.describe().then(
    (description) => description.status,
    () => undefined,
  );
  if (status === undefined || !ENDED_WITHOUT_RESULT.has(status)) return error;
  const progress = await handle.progress().catch(() => undefined);
  const answered = progress === undefined ? '' : ` after ${progress.succeeded} of ${progress.total} agents answered`;
  return new CliError(
    `run ${handle.workflowId} ended ${status.toLowerCase()}${answered}: it has no results`,
    ExitCode.agentsFailed,
  );
}

/**
 * Prints a finished run as the `run` command does and sets the exit code. `result` is the handle's result when the
 * caller already waited for it (the outputs it read back from the store are not read twice).
 */
export async function printRunResult(
  handle: RunHandle<unknown>,
  flags: { json?: boolean; jsonl?: boolean },
  result: Promise<unknown> = handle.result(),
): Promise<void> {
  const value = (await result) as PrintableResult;
  if (!value.results || !value.metrics) {
    process.stdout.write(`${JSON.stringify(value, null, flags.json ? 2 : undefined)}\n`);
    return;
  }
  if (flags.jsonl) process.stdout.write(value.results.map((agent) => `${JSON.stringify(agent)}\n`).join(''));
  else if (flags.json) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  else process.stdout.write(`${formatRunReport(value as Parameters<typeof formatRunReport>[0])}\n`);
  process.exitCode = value.metrics.succeeded === value.metrics.total ? ExitCode.ok : ExitCode.agentsFailed;
}
