import type { Tracing, TracingStart } from './tracing';
import { tracingWanted } from './wanted';

/** The SDK side of tracing, loaded only when an OTEL_* variable asks for it. */
function sdk(): typeof import('./tracing') {
  return require('./tracing') as typeof import('./tracing');
}

/**
 * Starts this process's tracing if an `OTEL_*` variable asks for it (once; later calls return the same): what
 * `fanout` commands and `createFanoutWorker` do themselves. A program that starts runs through `FanoutClient` calls it
 * (or sets up its own OpenTelemetry SDK) for the run's trace to begin at its start. Undefined when tracing is off.
 * Each export may take the exporter's timeout (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s by default) unless `shortLived`: a
 * short-lived program's exports are bounded by FANOUT_OTEL_FLUSH_MS, so none holds its exit.
 *
 * @example
 * startTracingFromEnvironment();
 * const fanout = await FanoutClient.connect();
 * ...
 * await stopTracing();
 */
export function startTracingFromEnvironment(start: TracingStart = {}): Tracing | undefined {
  return tracingWanted() ? sdk().startTracing(process.env, start) : undefined;
}

/**
 * Exports what is left and stops tracing, waiting at most `timeoutMs` (default FANOUT_OTEL_FLUSH_MS, 1000): a
 * collector that is down costs a program's exit no more. Never throws; nothing to do when tracing never started.
 */
export async function stopTracing(timeoutMs?: number): Promise<void> {
  if (!tracingWanted()) return;
  await sdk().stopTracing(timeoutMs);
}

/** Sends every span ended so far without stopping tracing, waiting at most `timeoutMs`. Never throws. */
export async function flushTracing(timeoutMs: number): Promise<void> {
  if (!tracingWanted()) return;
  await sdk().flushTracing(timeoutMs);
}
