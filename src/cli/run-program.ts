import { CommanderError, type Command } from 'commander';
import { logLevelFromEnvironment } from '../config/environment';
import { ExitCode, reportError } from './errors';
import type { MetricsFlags } from './commands/worker';
import { heapCapToApply } from './heap-cap';
import { buildProgram } from './program';
import { startTracingFromEnvironment, stopTracing } from '../telemetry/lifecycle';

// The SDK logs every worker state change at INFO; a CLI user wants warnings only (FANOUT_LOG_LEVEL to change).
const level = logLevelFromEnvironment('WARN');

/**
 * A worker asked for metrics serves them through the runtime: its Prometheus exporter is part of it. Every other
 * command installs the plain runtime, from its own modules: `@temporalio/worker` itself loads the whole worker and
 * its bundler (~0.4 s), which a client command never uses.
 */
function installRuntime(command: Command): void {
  const { DefaultLogger } = require('@temporalio/worker/lib/logger') as typeof import('@temporalio/worker/lib/logger');
  const logger = new DefaultLogger(level);
  if (command.name() === 'worker') {
    const { metricsEndpointOf } = require('./commands/worker') as typeof import('./commands/worker');
    const endpoint = metricsEndpointOf(command.opts<MetricsFlags>());
    if (endpoint) {
      (require('../metrics') as typeof import('../metrics')).installPrometheusRuntime(endpoint, { logger });
      return;
    }
  }
  const { Runtime } = require('@temporalio/worker/lib/runtime') as typeof import('@temporalio/worker/lib/runtime');
  // The runtime takes SIGINT and SIGTERM to shut down the workers of this process: only where a command runs one. Any
  // other command leaves them to Node (a Ctrl-C ends it at once); the runtime's handler swallowed the first Ctrl-C of a
  // `batch start --watch`, which ended only at the second.
  Runtime.install({ logger, ...(RUNS_A_WORKER.has(command.name()) ? {} : { shutdownSignals: [] }) });
}

/** Commands that run a worker in this process. */
const RUNS_A_WORKER = new Set(['worker', 'dev', 'demo']);

/** Parses the command line and runs the command (src/cli/main.ts loads this once it knows the CLI runs here). */
export function runProgram(): void {
  let tracedWorker = false;
  buildProgram()
    // Installed once, after parsing and before any command connects: the first connection fixes the process's runtime.
    // Not in a `fanout worker` that re-launches itself with a heap cap: the child installs its own (and binds the metrics port).
    .hook('preAction', (_program, command) => {
      if (command.name() === 'worker' && heapCapToApply() !== undefined) return;
      installRuntime(command);
      // Any OTEL_* variable turns tracing on (src/telemetry/); the SDK is not even loaded otherwise. A worker's exports
      // take the exporter's own timeout (they run behind its calls); any other command's are bounded by the flush bound.
      const worker = command.name() === 'worker';
      tracedWorker = startTracingFromEnvironment({ shortLived: !worker }) !== undefined && worker;
    })
    .parseAsync(process.argv)
    .catch((error: unknown) => {
      if (error instanceof CommanderError) {
        // Commander has printed its one-line message (or the help) already.
        const informational = ['commander.helpDisplayed', 'commander.version', 'commander.help'].includes(error.code);
        process.exitCode = informational ? ExitCode.ok : ExitCode.badInput;
        return;
      }
      process.exitCode = reportError(error);
    })
    // The last spans go out, for at most FANOUT_OTEL_FLUSH_MS: a collector that is down never holds the command up. A
    // stopped worker then exits: an export still retrying a collector that is down (for up to its 10 s) must not hold it.
    .finally(async () => {
      await stopTracing();
      if (tracedWorker) process.exit();
    });
}
