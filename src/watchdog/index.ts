import type { Client } from '@temporalio/client';
import { Runtime, type ActivityInterceptorsFactory, type Worker } from '@temporalio/worker';
import { integerFromEnvironment, type Environment } from '../config/environment';
import { CallWatchdog, type CallWatchdogOptions, type WatchdogLogger } from './call-watchdog';

export { CallWatchdog, type CallWatchdogOptions, type WatchedCall } from './call-watchdog';

/** Watchdog settings from the environment (see CallWatchdogOptions for each). */
export function watchdogOptionsFromEnvironment(environment: Environment = process.env): CallWatchdogOptions {
  return {
    watchIntervalMs: integerFromEnvironment('FANOUT_WATCH_INTERVAL_MS', environment) ?? 1000,
    lostAfterMs: integerFromEnvironment('FANOUT_LOST_WORKER_MS', environment) ?? 15_000,
    sweepIntervalMs: integerFromEnvironment('FANOUT_SWEEP_INTERVAL_MS', environment) ?? 10_000,
    sweepConcurrency: 4,
    idleMs: 60_000,
  };
}

function runtimeLogger(): WatchdogLogger {
  const logger = Runtime.instance().logger;
  return {
    info: (message, meta) => logger.info(`watchdog: ${message}`, meta),
    warn: (message, meta) => logger.warn(`watchdog: ${message}`, meta),
  };
}

const watchdogs = new WeakMap<Client, CallWatchdog>();

/** The watchdog of a worker's client (one per worker), created on first use. */
export function watchdogFor(client: Client): CallWatchdog {
  let watchdog = watchdogs.get(client);
  if (!watchdog) {
    const identity = client.options.identity ?? `${process.pid}`;
    watchdog = new CallWatchdog(client, identity, watchdogOptionsFromEnvironment(), runtimeLogger());
    watchdogs.set(client, watchdog);
  }
  return watchdog;
}

/**
 * The worker's innermost activity interceptor: the activities it runs, so its watchdog can tell a task Temporal handed
 * it that never ran (RunningActivities). Install it with `superviseWorker(worker, taskQueue, { tracksRunning: true })`.
 */
export function runningActivitiesInterceptor(): ActivityInterceptorsFactory {
  return (context) => {
    let client: Client | undefined;
    try {
      client = context.client;
    } catch {
      client = undefined; // a MockActivityEnvironment has none
    }
    return client ? watchdogFor(client).running.interceptor(context) : {};
  };
}

/**
 * Runs a worker's watchdog for as long as the worker runs: presence polls and the lost-worker sweep of its task queue.
 * Call after `Worker.create`; it starts when the worker is running and stops when it shuts down.
 */
export function superviseWorker(worker: Worker, taskQueue: string, options: { tracksRunning?: boolean } = {}): void {
  const client = worker.client;
  if (!client) return;
  const watchdog = watchdogFor(client);
  if (options.tracksRunning) watchdog.running.tracking = true;
  const check = setInterval(() => {
    const state = worker.getState();
    if (state === 'RUNNING') watchdog.startSweeping(taskQueue);
    // While shutting down, calls in their grace period still need presence (or peers would retry them) and watching.
    if (state === 'STOPPING' || state === 'DRAINING' || state === 'DRAINED') watchdog.stopSweeping();
    if (state === 'STOPPED' || state === 'FAILED') {
      clearInterval(check);
      void watchdog.stop();
    }
  }, 500);
  check.unref();
  // Stopped before run() settles, not up to 500 ms after: its caller may close the connection next, and a presence poll
  // still open on it would fail (NativePromiseDroppedError) and be reported as if something were wrong.
  const run = worker.run.bind(worker);
  worker.run = async () => {
    try {
      await run();
    } finally {
      clearInterval(check);
      await watchdog.stop();
    }
  };
}
