import { InvalidInputError } from '../contract/validation';

import { CliError, ExitCode } from './exit';

export { CliError, ExitCode };

/**
 * One line for an error and its causes: Temporal's errors say "Failed to start Workflow" or "Workflow execution failed"
 * and keep the reason (a size limit, the activity's failure) in `cause`, which a user must see.
 */
export function describeError(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && current !== null && depth < 6; depth += 1) {
    const message = (current instanceof Error ? current.message : String(current)).split('\n')[0].trim();
    if (message !== '' && !parts.some((part) => part.includes(message))) parts.push(message);
    current = current instanceof Error ? (current as Error & { cause?: unknown }).cause : undefined;
  }
  return parts.join(': ');
}

/** Prints an error as one line and returns the exit code for it. */
export function reportError(error: unknown): number {
  process.stderr.write(`fanout: ${describeError(error)}\n`);
  if (error instanceof InvalidInputError) return ExitCode.badInput;
  if (error instanceof CliError) return error.exitCode;
  return ExitCode.error;
}
