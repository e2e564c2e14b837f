import type { RunHandle } from '../client/fanout-client';
import type { AgentResult } from '../contract/agent-task';
import { ExitCode } from './errors';
import { formatRunReport } from './report';

/** A run's result as far as printing goes: a batch's summary has neither `results` nor `metrics`. */
type PrintableResult = {
  results?: AgentResult[];
  synthesis?: AgentResult;
  metrics?: { succeeded: number; total: number };
};

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
