import { Context } from '@temporalio/activity';
import type { MetricMeter } from '@temporalio/common';
import { Runtime, type ActivityInterceptorsFactory } from '@temporalio/worker';
import { defaultModelFromEnvironment } from '../llm/llm-client';
import { FailureType } from '../contract/failure-types';
import { defaultPacer, pacerSnapshot } from '../pacing/pacer';
import type { PacerSnapshot } from '../pacing/key-pacer';
import { AgentMetrics, type ActivityLabels } from './agent-metrics';
import { answerOf, failureOf, requestOf } from './call-outcome';
import { PacerRateLimitReader } from './pacer-rate-limits';

/** The activities that call a model; the batch and storage activities around them are not agent calls. */
export const METERED_ACTIVITY_TYPES: ReadonlySet<string> = new Set(['callAgent']);

/** One call a batch lane made (a lane runs many calls in one activity, so it reports each one itself). */
export interface LaneCall {
  model: string;
  status: 'ok' | 'failed' | 'retrying';
  failureType?: string;
  attempt: number;
  seconds: number;
  usage?: { promptTokens: number; completionTokens: number; totalTokens: number; cachedPromptTokens?: number };
  costUsd?: number;
  cacheSavingsUsd?: number;
  unpriced?: boolean;
}

/** Set by the metrics interceptor of this process, if any. */
let meterLaneCall: ((call: LaneCall) => void) | undefined;

/** Meters one call of a batch lane, where this worker exports metrics (a no-op where it does not). */
export function recordLaneCall(call: LaneCall): void {
  meterLaneCall?.(call);
}

/** How often 429s the pacer waited out are copied into the counter while calls are still waiting, ms. */
const PACER_SYNC_MS = 5000;

export interface AgentMetricsOptions {
  /** Model of tasks that name none, for their labels. Default FANOUT_MODEL, else gpt-4o-mini (as the activities). */
  defaultModel?: string;
  /** Where the instruments are created. Default: the process's Temporal runtime meter, read at the first call. */
  meter?: () => MetricMeter;
  /** The pacing of this process's calls. Default: the process pacer (src/pacing/). */
  pacing?: { enabled: () => boolean; snapshot: () => PacerSnapshot[] };
}

/** Never lets a metrics problem fail an agent call. */
function safely(context: Context, what: string, record: () => void): void {
  try {
    record();
  } catch (error) {
    context.log.warn(`metrics: could not record ${what}`, {
      error: error instanceof Error ? error.message : String(error),
    });
  }
}

/**
 * An activity interceptor that measures agent calls (`callAgent`, `runBatchItem`) from outside: attempts by model,
 * status and failure type, retries, tokens, cost, in-flight attempts, durations, and the provider's 429s. The activities
 * need no changes for it. Registered by `createFanoutWorker`; the values go wherever the process's Temporal runtime
 * exports metrics (see `installPrometheusRuntime`), and nowhere when it exports none.
 *
 * @example
 * Worker.create({ ..., interceptors: { activity: [agentMetricsInterceptor()] } });
 */
export function agentMetricsInterceptor(options: AgentMetricsOptions = {}): ActivityInterceptorsFactory {
  const defaultModel = options.defaultModel ?? defaultModelFromEnvironment();
  const pacing = options.pacing ?? { enabled: () => defaultPacer().options.enabled, snapshot: pacerSnapshot };
  const pacerRateLimits = new PacerRateLimitReader(pacing.snapshot);
  let metrics: AgentMetrics | undefined;

  // Created at the first call, not here: the runtime (and its exporter) must be installed before anything reads it.
  const instruments = (): AgentMetrics => {
    if (!metrics) {
      const created = new AgentMetrics(options.meter?.() ?? Runtime.instance().metricMeter);
      metrics = created;
      setInterval(() => syncPacer(created), PACER_SYNC_MS).unref();
    }
    return metrics;
  };
  const syncPacer = (target: AgentMetrics) => {
    for (const [model, count] of pacerRateLimits.increments()) target.providerRateLimited(count, { model });
  };

  meterLaneCall = (call) => {
    const context = Context.current();
    const { info } = context;
    safely(context, 'a call of a lane', () => {
      const target = instruments();
      const labels: ActivityLabels = {
        namespace: info.namespace,
        task_queue: info.taskQueue,
        activity_type: info.activityType,
      };
      target.started(labels);
      target.finished(labels, call);
      syncPacer(target);
    });
  };

  return (context) => {
    const { info } = context;
    if (!METERED_ACTIVITY_TYPES.has(info.activityType)) return {};
    return {
      inbound: {
        execute: async (input, next) => {
          const labels: ActivityLabels = {
            namespace: info.namespace,
            task_queue: info.taskQueue,
            activity_type: info.activityType,
          };
          // A batch item names its model only in its result; until then (and when it fails) it is "unknown".
          const requested =
            requestOf(input.args[0]).model ?? (info.activityType === 'callAgent' ? defaultModel : undefined);
          const startedAt = performance.now();
          let target: AgentMetrics | undefined;
          safely(context, 'the start of a call', () => {
            target = instruments();
            target.started(labels);
          });
          const seconds = () => (performance.now() - startedAt) / 1000;
          try {
            const result = await next(input);
            safely(context, 'a finished call', () => {
              const answer = answerOf(result);
              target?.finished(labels, {
                model: requested ?? answer.model ?? 'unknown',
                status: 'ok',
                attempt: info.attempt,
                seconds: seconds(),
                ...(answer.usage ? { usage: answer.usage } : {}),
                ...(answer.costUsd === undefined ? {} : { costUsd: answer.costUsd }),
                ...(answer.cacheSavingsUsd === undefined ? {} : { cacheSavingsUsd: answer.cacheSavingsUsd }),
                ...(answer.unpriced ? { unpriced: true } : {}),
              });
              if (target) syncPacer(target);
            });
            return result;
          } catch (error) {
            safely(context, 'a failed call', () => {
              const model = requested ?? 'unknown';
              const { status, failureType } = failureOf(error, info, context.cancellationSignal.aborted);
              target?.finished(labels, { model, status, failureType, attempt: info.attempt, seconds: seconds() });
              if (!target) return;
              // With pacing on, the pacer saw this 429 as well and the sync counts it; count it here only without.
              if (failureType === FailureType.RateLimited && !pacing.enabled())
                target.providerRateLimited(1, { model });
              syncPacer(target);
            });
            throw error;
          }
        },
      },
    };
  };
}
