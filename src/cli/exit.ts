// Kept free of imports: the worker's heap-cap launcher (src/cli/main.ts) loads only this before it re-launches, so the
// supervising parent stays a bare Node process.

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
