import type { MetricCounter, MetricHistogram, MetricMeter, MetricTags, MetricUpDownCounter } from '@temporalio/common';

/**
 * Names of fanout's own metrics. The Prometheus exporter installed by `installPrometheusRuntime` adds `_total` to
 * counters (`fanout_agent_calls_total`); other exporters keep the names as they are.
 */
export const AgentMetricName = {
  /** Counter: finished agent-call attempts by model, status and failure type. */
  calls: 'fanout_agent_calls',
  /** Counter: attempts after the first (Temporal retries). */
  retries: 'fanout_agent_call_retries',
  /** Counter: HTTP 429 answers from the provider, whether waited out inside the attempt or failing it. */
  rateLimited: 'fanout_provider_rate_limited',
  /**
   * Counter: tokens by model and kind (prompt, completion) of successful calls; `cached_prompt` counts the part of
   * `prompt` a provider served from its prompt cache.
   */
  tokens: 'fanout_tokens',
  /**
   * Counter: US dollars of successful calls from the worker's price table (src/pricing), in millionths: the SDK's
   * counters hold whole numbers. Divide by 1e6 for dollars.
   */
  costMicroUsd: 'fanout_cost_microusd',
  /**
   * Counter: what providers' prompt caches saved on successful calls against their prompts billed uncached, in
   * millionths of a US dollar (a call whose cache writes cost more than they saved adds nothing).
   */
  cacheSavingsMicroUsd: 'fanout_cache_savings_microusd',
  /** Counter: successful calls whose cost is unknown (a model without a price): the cost counter leaves them out. */
  unpriced: 'fanout_agent_calls_unpriced',
  /** Up-down counter (a gauge in Prometheus): attempts running now on this worker. */
  inFlight: 'fanout_agent_calls_in_flight',
  /** Histogram, seconds: duration of an attempt as the worker ran it, rate-limit waits included. */
  callDuration: 'fanout_agent_call_duration_seconds',
} as const;

/** Bucket bounds of the call-duration histogram, seconds: a chat completion takes from a fraction of a second to minutes. */
export const AGENT_CALL_DURATION_BUCKETS: readonly number[] = [
  0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600,
];

/**
 * How an attempt ended. `retrying`: it failed and Temporal will schedule another attempt (as far as the worker can
 * tell: the retry policy's schedule-to-close limit may still end it); `failed`: no attempt follows.
 */
export type CallStatus = 'ok' | 'failed' | 'retrying' | 'cancelled';

/** Labels every fanout metric carries, named as the SDK's own Prometheus metrics name theirs. */
export interface ActivityLabels {
  namespace: string;
  task_queue: string;
  activity_type: string;
}

export interface TokenCounts {
  promptTokens: number;
  completionTokens: number;
  /** Of promptTokens, served from the provider's prompt cache. */
  cachedPromptTokens?: number;
}

/** One attempt's end, as the metrics take it. */
export interface CallOutcome {
  model: string;
  status: CallStatus;
  /** The ApplicationFailure type of a failed, retrying or cancelled attempt. */
  failureType?: string;
  attempt: number;
  seconds: number;
  usage?: TokenCounts;
  costUsd?: number;
  /** See AgentCallResult.cacheSavingsUsd. */
  cacheSavingsUsd?: number;
  unpriced?: boolean;
}

/** Each metric's description, as an exporter shows it (Prometheus: `# HELP`). */
const DESCRIPTIONS = {
  calls: 'Finished agent-call attempts by model, status (ok, failed, retrying, cancelled) and failure type',
  retries: 'Agent-call attempts after the first (Temporal retries)',
  rateLimited: 'HTTP 429 answers from the provider',
  tokens:
    'Tokens of successful agent calls by model and kind (prompt, completion, cached_prompt: the part of prompt read from cache)',
  cacheSavingsMicroUsd:
    "US dollars providers' prompt caches saved on successful agent calls, in millionths (divide by 1e6)",
  costMicroUsd: 'US dollars of successful agent calls, in millionths (divide by 1e6)',
  unpriced: 'Successful agent calls of models without a price (their cost is not counted)',
  inFlight: 'Agent-call attempts running on this worker',
  callDuration: 'Duration of agent-call attempts on the worker, rate-limit waits included',
} as const satisfies Record<keyof typeof AgentMetricName, string>;

type CounterName =
  'calls' | 'retries' | 'rateLimited' | 'tokens' | 'costMicroUsd' | 'cacheSavingsMicroUsd' | 'unpriced';

/**
 * The instruments, created once per process from a meter: creating one per activity would cost a native call each.
 * Labels go with every value instead of `withTags`, which the runtime's own meter does not support.
 */
export class AgentMetrics {
  private readonly counters: Readonly<Record<CounterName, MetricCounter>>;
  /** Fractions of a micro-dollar not yet counted, per label set: thousands of tiny calls must add up. */
  private readonly costCarry = new Map<string, number>();
  private readonly inFlight: MetricUpDownCounter | undefined;
  private readonly duration: MetricHistogram;

  constructor(meter: MetricMeter) {
    const counter = (name: CounterName) => meter.createCounter(AgentMetricName[name], '', DESCRIPTIONS[name]);
    this.counters = {
      calls: counter('calls'),
      retries: counter('retries'),
      rateLimited: counter('rateLimited'),
      tokens: counter('tokens'),
      costMicroUsd: counter('costMicroUsd'),
      cacheSavingsMicroUsd: counter('cacheSavingsMicroUsd'),
      unpriced: counter('unpriced'),
    };
    // Optional in the SDK's MetricMeter interface; every meter the SDK itself makes has it.
    this.inFlight = meter.createUpDownCounter?.(AgentMetricName.inFlight, '', DESCRIPTIONS.inFlight);
    this.duration = meter.createHistogram(AgentMetricName.callDuration, 'float', 's', DESCRIPTIONS.callDuration);
  }

  started(labels: ActivityLabels): void {
    this.inFlight?.add(1, { ...labels });
  }

  finished(labels: ActivityLabels, outcome: CallOutcome): void {
    this.inFlight?.add(-1, { ...labels });
    const byModel: MetricTags = { ...labels, model: outcome.model };
    this.counters.calls.add(1, {
      ...byModel,
      status: outcome.status,
      ...(outcome.failureType === undefined ? {} : { failure_type: outcome.failureType }),
    });
    if (outcome.attempt > 1) this.counters.retries.add(1, byModel);
    this.duration.record(outcome.seconds, { ...byModel, status: outcome.status });
    if (outcome.usage) {
      // A zero is not added: it would only create a series with nothing in it.
      if (outcome.usage.promptTokens > 0)
        this.counters.tokens.add(outcome.usage.promptTokens, { ...byModel, kind: 'prompt' });
      if (outcome.usage.completionTokens > 0)
        this.counters.tokens.add(outcome.usage.completionTokens, { ...byModel, kind: 'completion' });
      if ((outcome.usage.cachedPromptTokens ?? 0) > 0)
        this.counters.tokens.add(outcome.usage.cachedPromptTokens ?? 0, { ...byModel, kind: 'cached_prompt' });
    }
    if (outcome.unpriced) this.counters.unpriced.add(1, byModel);
    else if (outcome.costUsd !== undefined && outcome.costUsd > 0)
      this.addCost('costMicroUsd', outcome.costUsd, byModel);
    if (!outcome.unpriced && outcome.cacheSavingsUsd !== undefined && outcome.cacheSavingsUsd > 0)
      this.addCost('cacheSavingsMicroUsd', outcome.cacheSavingsUsd, byModel);
  }

  private addCost(counter: 'costMicroUsd' | 'cacheSavingsMicroUsd', usd: number, tags: MetricTags): void {
    const key = `${counter} ${JSON.stringify(tags)}`;
    const exact = usd * 1e6 + (this.costCarry.get(key) ?? 0);
    const whole = Math.floor(exact);
    this.costCarry.set(key, exact - whole);
    if (whole > 0) this.counters[counter].add(whole, tags);
  }

  /** 429s, by the model of the call that got them. */
  providerRateLimited(count: number, tags: MetricTags & { model: string }): void {
    if (count > 0) this.counters.rateLimited.add(count, tags);
  }
}
