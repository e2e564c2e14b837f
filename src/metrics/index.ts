export { agentMetricsInterceptor, METERED_ACTIVITY_TYPES } from './activity-interceptor';
export type { AgentMetricsOptions } from './activity-interceptor';
export { AGENT_CALL_DURATION_BUCKETS, AgentMetricName } from './agent-metrics';
export type { CallOutcome, CallStatus } from './agent-metrics';
export {
  installPrometheusRuntime,
  metricsEndpointFromEnvironment,
  prometheusRuntimeOptions,
} from './prometheus-runtime';
export type { MetricsEndpoint } from './prometheus-runtime';
