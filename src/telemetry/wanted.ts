import type { Environment } from '../config/environment';

/** The service name when OTEL_SERVICE_NAME (or `service.name` in OTEL_RESOURCE_ATTRIBUTES) names none. */
export const DEFAULT_SERVICE_NAME = 'temporal-fanout';

/**
 * How long a CLI command or a stopping worker waits for its last spans to reach the collector, ms
 * (FANOUT_OTEL_FLUSH_MS). The OTLP exporter retries a refused connection for up to its 10 s timeout and then throws;
 * a command must not hang on a collector that is down, so past this the spans are dropped.
 */
export const DEFAULT_FLUSH_MS = 1000;

/**
 * Tracing is on when any `OTEL_*` variable is set (the standard way to configure OpenTelemetry), unless
 * OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. Off, OpenTelemetry's SDK is not even loaded (this file is all
 * that decides it), and fanout's spans go to the API's no-op tracer.
 */
export function tracingWanted(environment: Environment = process.env): boolean {
  const set = Object.entries(environment).some(([name, value]) => name.startsWith('OTEL_') && value !== '');
  if (!set) return false;
  if (environment.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  return environment.OTEL_TRACES_EXPORTER?.trim().toLowerCase() !== 'none';
}
