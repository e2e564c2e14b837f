import type { MetricHistogram, MetricMeter } from '@temporalio/common';

/**
 * The OpenTelemetry GenAI client metrics, exported beside fanout's own by the Temporal runtime's exporter (Prometheus
 * with FANOUT_METRICS_PORT). Prometheus takes no dots in names and labels, so they are spelled as an OpenTelemetry
 * collector's Prometheus exporter spells the conventions' names: `gen_ai.client.token.usage` is
 * `gen_ai_client_token_usage`, `gen_ai.client.operation.duration` (seconds) `gen_ai_client_operation_duration_seconds`,
 * `gen_ai.request.model` the label `gen_ai_request_model`.
 */
export const GenAiMetricName = {
  tokenUsage: 'gen_ai_client_token_usage',
  operationDuration: 'gen_ai_client_operation_duration_seconds',
} as const;

/** One model call attempt, as the metrics take it. */
export interface GenAiCall {
  provider: string;
  requestModel: string;
  responseModel?: string;
  seconds: number;
  inputTokens?: number;
  outputTokens?: number;
  /** The failure type of a call that failed. */
  errorType?: string;
}

interface Instruments {
  tokens: MetricHistogram;
  duration: MetricHistogram;
}

let instruments: Instruments | undefined | null = null;

/** The instruments, made once per process from the Temporal runtime's meter (undefined outside a worker). */
function instrumentsOf(meter: () => MetricMeter): Instruments | undefined {
  if (instruments !== null) return instruments;
  try {
    const made = meter();
    instruments = {
      tokens: made.createHistogram(GenAiMetricName.tokenUsage, 'int', '{token}', 'Tokens of model calls by type'),
      duration: made.createHistogram(GenAiMetricName.operationDuration, 'float', 's', 'Duration of model calls'),
    };
  } catch {
    instruments = undefined;
  }
  return instruments;
}

/** The runtime's meter, read when the first call ends: by then the worker (and its runtime) exist. */
function runtimeMeter(): MetricMeter {
  const { Runtime } = require('@temporalio/worker') as typeof import('@temporalio/worker');
  return Runtime.instance().metricMeter;
}

/** Records one model call attempt; never throws (a metrics problem must not fail a call). */
export function recordGenAiCall(call: GenAiCall, meter: () => MetricMeter = runtimeMeter): void {
  try {
    const recorder = instrumentsOf(meter);
    if (!recorder) return;
    const tags = {
      gen_ai_operation_name: 'chat',
      gen_ai_provider_name: call.provider,
      gen_ai_request_model: call.requestModel,
      ...(call.responseModel === undefined ? {} : { gen_ai_response_model: call.responseModel }),
    };
    recorder.duration.record(
      call.seconds,
      call.errorType === undefined ? tags : { ...tags, error_type: call.errorType },
    );
    if (call.inputTokens !== undefined)
      recorder.tokens.record(call.inputTokens, { ...tags, gen_ai_token_type: 'input' });
    if (call.outputTokens !== undefined)
      recorder.tokens.record(call.outputTokens, { ...tags, gen_ai_token_type: 'output' });
  } catch {
    // dropped
  }
}
