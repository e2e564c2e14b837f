import { IllegalStateError } from '@temporalio/common';
import { Runtime, type RuntimeOptions } from '@temporalio/worker';
import type { Environment } from '../config/environment';
import { AGENT_CALL_DURATION_BUCKETS, AgentMetricName } from './agent-metrics';

/** Where a worker serves `/metrics`: FANOUT_METRICS_PORT and FANOUT_METRICS_HOST. */
export interface MetricsEndpoint {
  /** 0 is not allowed: the SDK's exporter does not report the port it picked, so scrapers could not find it. */
  port: number;
  /** Default 0.0.0.0: Prometheus scrapes from outside the worker's host. */
  host: string;
}

/**
 * The metrics endpoint the environment asks for, or undefined when FANOUT_METRICS_PORT is unset. Throws naming the
 * variable when it is not a port.
 */
export function metricsEndpointFromEnvironment(environment: Environment = process.env): MetricsEndpoint | undefined {
  const raw = environment.FANOUT_METRICS_PORT?.trim();
  if (raw === undefined || raw === '') return undefined;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new Error(
      `FANOUT_METRICS_PORT must be a port number from 1 to 65535, got "${environment.FANOUT_METRICS_PORT}"`,
    );
  }
  return { port, host: environment.FANOUT_METRICS_HOST?.trim() || '0.0.0.0' };
}

/**
 * Runtime options that export the SDK's own metrics and fanout's (`fanout_*`, see agent-metrics.ts) on one
 * Prometheus endpoint, `http://<host>:<port>/metrics`. Counters end in `_total` and durations are seconds, as
 * Prometheus names them and as deploy/grafana/fanout-dashboard.json queries them.
 */
export function prometheusRuntimeOptions(endpoint: MetricsEndpoint): RuntimeOptions {
  // An IPv6 host needs brackets in a socket address.
  const host = endpoint.host.includes(':') && !endpoint.host.startsWith('[') ? `[${endpoint.host}]` : endpoint.host;
  return {
    telemetryOptions: {
      metrics: {
        prometheus: {
          bindAddress: `${host}:${endpoint.port}`,
          countersTotalSuffix: true,
          useSecondsForDurations: true,
          // The exporter's default buckets stop at 10 (meant for milliseconds); agent calls take seconds to minutes.
          histogramBucketOverrides: { [AgentMetricName.callDuration]: [...AGENT_CALL_DURATION_BUCKETS] },
        },
      },
    },
  };
}

/**
 * Installs the process's Temporal runtime with the Prometheus endpoint. Call it once, before anything in the process
 * connects to Temporal (a `NativeConnection`, a worker): the first connection creates the default runtime, without
 * metrics, and a runtime cannot be installed twice. `options` are the runtime's other settings (a logger ...).
 *
 * @example
 * installPrometheusRuntime({ port: 9464, host: '0.0.0.0' });
 * const worker = await createFanoutWorker();
 */
export function installPrometheusRuntime(
  endpoint: MetricsEndpoint,
  options: Omit<RuntimeOptions, 'telemetryOptions'> = {},
): Runtime {
  try {
    return Runtime.install({ ...options, ...prometheusRuntimeOptions(endpoint) });
  } catch (error) {
    if (error instanceof IllegalStateError) {
      throw new Error(
        `cannot serve metrics: the Temporal runtime already exists; install it once, before the first connection (${error.message})`,
        { cause: error },
      );
    }
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(
      `cannot serve metrics on ${endpoint.host}:${endpoint.port} (FANOUT_METRICS_PORT / FANOUT_METRICS_HOST): ${reason}`,
      { cause: error },
    );
  }
}
