#!/usr/bin/env node
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { reportError } from './errors';
import { buildProgram } from './program';

// The SDK logs every worker state change at INFO; a CLI user wants warnings only (FANOUT_LOG_LEVEL to change).
const level = (process.env.FANOUT_LOG_LEVEL ?? 'WARN').toUpperCase() as 'TRACE' | 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
Runtime.install({ logger: new DefaultLogger(level) });

buildProgram()
  .parseAsync(process.argv)
  .catch((error: unknown) => {
    process.exitCode = reportError(error);
  });
