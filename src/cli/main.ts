#!/usr/bin/env node
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { CommanderError } from 'commander';
import { ExitCode, reportError } from './errors';
import { buildProgram } from './program';

// The SDK logs every worker state change at INFO; a CLI user wants warnings only (FANOUT_LOG_LEVEL to change).
const level = (process.env.FANOUT_LOG_LEVEL ?? 'WARN').toUpperCase() as 'TRACE' | 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
Runtime.install({ logger: new DefaultLogger(level) });

buildProgram()
  .parseAsync(process.argv)
  .catch((error: unknown) => {
    if (error instanceof CommanderError) {
      // Commander has printed its one-line message (or the help) already.
      const informational = ['commander.helpDisplayed', 'commander.version', 'commander.help'].includes(error.code);
      process.exitCode = informational ? ExitCode.ok : ExitCode.badInput;
      return;
    }
    process.exitCode = reportError(error);
  });
