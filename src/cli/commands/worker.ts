import { Command, Option } from 'commander';
import { providerFromEnvironment, OPENAI_BASE_URL } from '../../llm/llm-client';
import { taskQueueFromEnvironment, temporalConnectionFromEnvironment } from '../../config/environment';
import { metricsEndpointFromEnvironment, type MetricsEndpoint } from '../../metrics';
import {
  createFanoutWorker,
  FANOUT_WORKER_DEFAULTS,
  maxCachedWorkflowsFromEnvironment,
  SHUTDOWN_FORCE_MARGIN_MS,
  shutdownGraceMsFromEnvironment,
} from '../../worker';
import { startHealthServer } from '../../worker-health';
import { ExitCode } from '../exit';
import { capWorkflowThreads, relaunchWithHeapCap } from '../heap-cap';
import { loadToolModule } from '../../tools/worker-tools';
import { connectionOptions, positiveNumber, temporalOverrides, wholeNumber, type ConnectionFlags } from '../options';

/**
 * A worker told to stop is gone this long after its grace, whatever still runs or waits on a server that does not
 * answer: the SDK gives up first (SHUTDOWN_FORCE_MARGIN_MS), then the process exits, and a `fanout worker` launcher
 * kills its child should even that not happen. Exiting closes the calls' connections, so nothing outlives the process.
 */
const EXIT_MARGIN_MS = SHUTDOWN_FORCE_MARGIN_MS + 2000;
const KILL_MARGIN_MS = EXIT_MARGIN_MS + 3000;

/** `--metrics-port` and `--metrics-host`. */
export interface MetricsFlags {
  metricsPort?: number;
  metricsHost?: string;
}

/**
 * The metrics endpoint of `--metrics-port` / `--metrics-host`, else of FANOUT_METRICS_PORT / FANOUT_METRICS_HOST: the
 * flags stand in for the variables, which the library reads and checks in one place (metricsEndpointFromEnvironment).
 */
export function metricsEndpointOf(flags: MetricsFlags): MetricsEndpoint | undefined {
  return metricsEndpointFromEnvironment({
    ...process.env,
    ...(flags.metricsPort === undefined ? {} : { FANOUT_METRICS_PORT: String(flags.metricsPort) }),
    ...(flags.metricsHost === undefined ? {} : { FANOUT_METRICS_HOST: flags.metricsHost }),
  });
}

interface WorkerFlags extends ConnectionFlags, MetricsFlags {
  maxConcurrent?: number;
  pollers?: number;
  rate?: number;
  queueRate?: number;
  shutdownGrace?: number;
  healthPort?: number;
  healthHost: string;
  tools?: string;
}

export function workerCommand(): Command {
  const command = new Command('worker')
    .description('run a worker: polls the task queue and runs the workflows and agent calls (until SIGINT/SIGTERM)')
    .option(
      '--max-concurrent <n>',
      `agent calls at once on this worker [env FANOUT_MAX_CONCURRENT_ACTIVITIES, default ${FANOUT_WORKER_DEFAULTS.maxConcurrentActivities}]`,
      wholeNumber(1),
    )
    .option(
      '--pollers <n>',
      `most concurrent activity polls, autoscaled [env FANOUT_ACTIVITY_POLLERS, default ${FANOUT_WORKER_DEFAULTS.activityPollers}]`,
      wholeNumber(1),
    )
    .option(
      '--rate <per-second>',
      'agent calls this worker starts per second [env FANOUT_WORKER_ACTIVITIES_PER_SECOND]',
      positiveNumber,
    )
    .addOption(
      new Option('--tools <modules>', 'modules whose defineTool exports agents may call, comma-separated').env(
        'FANOUT_TOOLS',
      ),
    )
    .option(
      '--queue-rate <per-second>',
      'agent calls per second across the task queue, server-enforced [env FANOUT_TASK_QUEUE_ACTIVITIES_PER_SECOND]',
      positiveNumber,
    )
    .option(
      '--shutdown-grace <ms>',
      `on SIGTERM, how long in-flight calls may finish before they are cancelled and retried elsewhere [env FANOUT_SHUTDOWN_GRACE_MS, default ${FANOUT_WORKER_DEFAULTS.shutdownGraceMs}]`,
      wholeNumber(0),
    )
    .addOption(
      new Option('--health-port <port>', 'serve GET /healthz (200 while polling) on this port')
        .env('FANOUT_HEALTH_PORT')
        .argParser(wholeNumber(0, 65535)),
    )
    .addOption(
      new Option('--health-host <host>', 'address of the health endpoint').env('FANOUT_HEALTH_HOST').default('0.0.0.0'),
    )
    .option(
      '--metrics-port <port>',
      "serve Prometheus metrics (the SDK's and fanout_*) at /metrics on this port [env FANOUT_METRICS_PORT]",
      wholeNumber(1, 65535),
    )
    .option('--metrics-host <host>', 'address of the metrics endpoint [env FANOUT_METRICS_HOST, default 0.0.0.0]');
  for (const option of connectionOptions()) command.addOption(option);
  return command.action(async (flags: WorkerFlags) => {
    const shutdownGraceMs = flags.shutdownGrace ?? shutdownGraceMsFromEnvironment();
    // By default the worker runs in a child with a capped heap (src/cli/heap-cap.ts); this process only supervises it.
    if (await relaunchWithHeapCap({ killAfterSignalMs: shutdownGraceMs + KILL_MARGIN_MS })) return;
    // The workflow threads hold the cached workflows: their heap cap is sized for the cache, not this thread's.
    capWorkflowThreads(maxCachedWorkflowsFromEnvironment());
    const temporal = { ...temporalConnectionFromEnvironment(), ...temporalOverrides(flags) };
    const taskQueue = flags.taskQueue ?? taskQueueFromEnvironment();
    // src/cli/main.ts installs the runtime with the metrics endpoint before this runs (it must precede any connection).
    const metrics = metricsEndpointOf(flags);
    const tools = flags.tools
      ?.split(',')
      .map((module) => module.trim())
      .filter(Boolean)
      .flatMap(loadToolModule);
    const worker = await createFanoutWorker({
      temporal,
      taskQueue,
      maxConcurrentActivities: flags.maxConcurrent,
      activityPollers: flags.pollers,
      maxActivitiesPerSecond: flags.rate,
      maxTaskQueueActivitiesPerSecond: flags.queueRate,
      shutdownGraceMs,
      ...(tools === undefined ? {} : { tools }),
    });
    const log = (line: string) => process.stderr.write(`${line}\n`);
    const health =
      flags.healthPort === undefined
        ? undefined
        : await startHealthServer(worker, { port: flags.healthPort, host: flags.healthHost });
    // The SDK's own signal handlers start the shutdown; this says what the wait is for, and bounds it.
    const announceStop = (signal: string) => {
      log(
        `${signal}: worker stopping; ${worker.getStatus().numInFlightActivities} agent calls in flight get up to ${shutdownGraceMs} ms to finish`,
      );
      const deadline = setTimeout(() => {
        log(
          `worker not stopped ${shutdownGraceMs + EXIT_MARGIN_MS} ms after ${signal} (is Temporal unreachable?); exiting, which ends the calls still open`,
        );
        process.exit(ExitCode.error);
      }, shutdownGraceMs + EXIT_MARGIN_MS);
      deadline.unref();
    };
    process.once('SIGTERM', announceStop);
    process.once('SIGINT', announceStop);
    const provider = providerFromEnvironment();
    log(
      `worker polling task queue "${taskQueue}" on ${temporal.address} (namespace ${temporal.namespace}); ` +
        `agents call ${provider.baseURL ?? OPENAI_BASE_URL}${provider.simulated ? ' (the simulator: no OPENAI_API_KEY or OPENAI_BASE_URL set)' : ''}` +
        (tools ? `; tools ${tools.map((tool) => tool.name).join(', ')}` : '') +
        (health ? `; health on http://${flags.healthHost}:${health.port}/healthz` : '') +
        (metrics ? `; metrics on http://${metrics.host}:${metrics.port}/metrics` : ''),
    );
    try {
      await worker.run();
      log('worker stopped');
    } finally {
      process.removeListener('SIGTERM', announceStop);
      process.removeListener('SIGINT', announceStop);
      await health?.close();
    }
  });
}
