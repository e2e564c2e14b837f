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

/** Prints an error as one line and returns the exit code for it. */
export function reportError(error: unknown): number {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`fanout: ${message.split('\n')[0]}\n`);
  if (error instanceof InvalidInputError) return ExitCode.badInput;
  if (error instanceof CliError) return error.exitCode;
  return ExitCode.error;
}
