import { InvalidInputError } from '../contract/validation';

/** Exit codes of the `fanout` command. */
export const ExitCode = {
  ok: 0,
  /** The run finished but some agent failed or was cancelled. */
  agentsFailed: 1,
  /** Bad input or usage: nothing was started. */
  badInput: 2,
  /** Anything else: connection, server, unexpected. */
  error: 3,
} as const;

/** A failure the CLI reports as one line, with the exit code it maps to. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = ExitCode.error,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

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
