import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { FanoutClient } from '../src/client/fanout-client';
import type { AgentTask } from '../src/contract/agent-task';
import { FailureType } from '../src/contract/failure-types';
import { diesWithParent, exitOf } from '../src/local/child-processes';
import { freePort } from '../src/local/free-port';
import { answerOf, failureOf, requestOf } from '../src/metrics/call-outcome';
import { metricsEndpointFromEnvironment } from '../src/metrics';
import { BUILT_IN_PRICES, priceOf } from '../src/pricing';
import { ROOT } from './support/paths';
import { spawnWorker, type WorkerProcess } from './support/processes';
import { useTestServers } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

/** One sample of the Prometheus text format. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text exposition format (what the SDK's exporter serves). */
function parseSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1]] = pair[2].replace(/\\(.)/g, (_, escaped: string) => (escaped === 'n' ? '\n' : escaped));
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/** Sum of the samples of a metric whose labels include `where`. */
function sum(samples: Sample[], name: string, where: Record<string, string> = {}): number {
  return samples
    .filter(
      (sample) => sample.name === name && Object.entries(where).every(([key, value]) => sample.labels[key] === value),
    )
    .reduce((total, sample) => total + sample.value, 0);
}

/** A real Prometheus (Debian's package; scripts/test-prerequisites.sh installs it) scraping one target every second. */
interface PrometheusServer {
  /** The value of an instant query's series; throws on a query Prometheus refuses. */
  query(expression: string): Promise<{ labels: Record<string, string>; value: string }[]>;
  stop(): Promise<void>;
}

async function startPrometheus(target: string): Promise<PrometheusServer> {
  const directory = mkdtempSync(path.join(tmpdir(), 'fanout-prometheus-'));
  const config = path.join(directory, 'prometheus.yml');
  writeFileSync(
    config,
    `global: { scrape_interval: 1s, evaluation_interval: 1s }\nscrape_configs:\n  - job_name: fanout-worker\n    static_configs: [{ targets: ['${target}'] }]\n`,
  );
  const port = await freePort();
  const [command, args] = diesWithParent(
    'prometheus',
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${path.join(directory, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    'TERM',
  );
  let output = '';
  const child: ChildProcess = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const stop = async () => {
    child.kill('SIGTERM');
    await exitOf(child);
    rmSync(directory, { recursive: true, force: true });
  };
  try {
    await waitFor('Prometheus to be ready', async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}: ${output}`);
      return (await fetch(`http://127.0.0.1:${port}/-/ready`)).ok;
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    stop,
    query: async (expression) => {
      const response = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(expression)}`);
      const body = (await response.json()) as {
        status: string;
        error?: string;
        data?: { result: { metric: Record<string, string>; value: [number, string] }[] };
      };
      if (body.status !== 'success' || !body.data)
        throw new Error(`Prometheus refused ${expression}: ${body.error ?? response.status}`);
      return body.data.result.map((series) => ({ labels: series.metric, value: series.value[1] }));
    },
  };
}

/** The PromQL of every panel of the Grafana dashboard. */
function dashboardQueries(dashboard: {
  panels: { title: string; targets?: { expr: string }[] }[];
}): { title: string; expr: string }[] {
  return dashboard.panels.flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({ title: panel.title, expr: target.expr })),
  );
}

let worker: WorkerProcess | undefined;
let prometheus: PrometheusServer | undefined;
const suite = useTestServers({
  beforeStop: async () => {
    await prometheus?.stop();
    await worker?.stop();
  },
});

describe('a worker process with FANOUT_METRICS_PORT', () => {
  it('serves the SDK metrics and fanout_* counts of a run on /metrics, during the run and exactly after it', async () => {
    const port = await freePort();
    const metricsUrl = `http://127.0.0.1:${port}/metrics`;
    const taskQueue = uniqueName('metrics');
    worker = await spawnWorker({
      address: suite.servers.server.address,
      taskQueue,
      env: {
        OPENAI_BASE_URL: suite.servers.simulator.baseUrl,
        OPENAI_API_KEY: 'test-key',
        FANOUT_METRICS_PORT: String(port),
        FANOUT_METRICS_HOST: '127.0.0.1',
      },
    });
    expect(worker.output()).toContain(`metrics on http://127.0.0.1:${port}/metrics`);
    const scrape = async () => {
      const response = await fetch(metricsUrl);
      expect(response.status).toBe(200);
      return parseSamples(await response.text());
    };
    const ours = { task_queue: taskQueue };
    prometheus = await startPrometheus(`127.0.0.1:${port}`);

    // 12 agents: 2 refused for good (403), 1 answered on its second attempt (500 first), 1 rate-limited once and
    // waited out inside its attempt by the pacer, the rest slow enough to be seen in flight.
    const tasks: AgentTask[] = Array.from({ length: 12 }, (_, index) => {
      const marker =
        index < 2
          ? '[sim fault=403]'
          : index === 2
            ? '[sim fault=500 times=1]'
            : index === 3
              ? '[sim fault=429 times=1 retry-after=1]'
              : '[sim latency=1500]';
      return { id: `agent-${index}`, prompt: `question ${index} ${marker}` };
    });
    const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
    const handle = await client.startParallel(tasks, { retry: { initialIntervalMs: 200 } });

    const inFlight = await waitFor('calls in flight on /metrics', async () => {
      const value = sum(await scrape(), 'fanout_agent_calls_in_flight', ours);
      return value > 0 ? value : undefined;
    });
    expect(inFlight).toBeGreaterThan(0);

    const { results, metrics } = await handle.result();
    expect(results.filter((result) => result.status === 'ok')).toHaveLength(10);
    expect(results.filter((result) => result.status === 'failed')).toHaveLength(2);
    // The workflow's result is recorded once the activities have reported back, and the counts before that.
    const samples = await scrape();

    expect(sum(samples, 'fanout_agent_calls_total', { ...ours, status: 'ok' })).toBe(10);
    expect(sum(samples, 'fanout_agent_calls_total', { ...ours, status: 'failed' })).toBe(2);
    expect(
      sum(samples, 'fanout_agent_calls_total', { ...ours, status: 'failed', failure_type: FailureType.Forbidden }),
    ).toBe(2);
    expect(
      sum(samples, 'fanout_agent_calls_total', {
        ...ours,
        status: 'retrying',
        failure_type: FailureType.ProviderUnavailable,
      }),
    ).toBe(1);
    expect(sum(samples, 'fanout_agent_calls_total', { ...ours, status: 'cancelled' })).toBe(0);
    expect(
      sum(samples, 'fanout_agent_calls_total', { ...ours, activity_type: 'callAgent', model: 'gpt-4o-mini' }),
    ).toBe(13);
    expect(sum(samples, 'fanout_agent_call_retries_total', ours)).toBe(1);
    expect(sum(samples, 'fanout_provider_rate_limited_total', { model: 'gpt-4o-mini' })).toBe(1);
    expect(sum(samples, 'fanout_agent_calls_in_flight', ours)).toBe(0);

    expect(metrics.tokens.total).toBeGreaterThan(0);
    expect(sum(samples, 'fanout_tokens_total', { ...ours, kind: 'prompt' })).toBe(metrics.tokens.prompt);
    expect(sum(samples, 'fanout_tokens_total', { ...ours, kind: 'completion' })).toBe(metrics.tokens.completion);
    // Millionths of a dollar, the fraction carried to the next call: short of the run's cost by less than one.
    // Priced by the worker's built-in table; in millionths of a dollar with the fraction carried to the next call,
    // so short of the exact cost by less than one.
    const costUsd = results.reduce(
      (total, result) => total + (priceOf('gpt-4o-mini', result.usage, BUILT_IN_PRICES) ?? 0),
      0,
    );
    expect(costUsd).toBeGreaterThan(0);
    const microUsd = sum(samples, 'fanout_cost_microusd_total', ours);
    expect(costUsd * 1e6 - microUsd).toBeGreaterThanOrEqual(-1e-6);
    expect(costUsd * 1e6 - microUsd).toBeLessThan(1);
    expect(sum(samples, 'fanout_agent_calls_unpriced_total', ours)).toBe(0);

    // The GenAI conventions' client metrics beside them: every attempt timed (the 403s and the 500 with their failure
    // type), the answered ones' tokens by type, equal to the run's.
    const genAi = {
      gen_ai_operation_name: 'chat',
      gen_ai_provider_name: 'openai',
      gen_ai_request_model: 'gpt-4o-mini',
    };
    expect(sum(samples, 'gen_ai_client_operation_duration_seconds_count', genAi)).toBe(13);
    expect(
      sum(samples, 'gen_ai_client_operation_duration_seconds_count', { ...genAi, error_type: FailureType.Forbidden }),
    ).toBe(2);
    expect(
      sum(samples, 'gen_ai_client_operation_duration_seconds_count', {
        ...genAi,
        error_type: FailureType.ProviderUnavailable,
      }),
    ).toBe(1);
    expect(sum(samples, 'gen_ai_client_token_usage_sum', { ...genAi, gen_ai_token_type: 'input' })).toBe(
      metrics.tokens.prompt,
    );
    expect(sum(samples, 'gen_ai_client_token_usage_sum', { ...genAi, gen_ai_token_type: 'output' })).toBe(
      metrics.tokens.completion,
    );
    expect(sum(samples, 'gen_ai_client_token_usage_count', { ...genAi, gen_ai_token_type: 'input' })).toBe(10);

    // Every attempt in the histogram, each slow call in a bucket above a second.
    expect(sum(samples, 'fanout_agent_call_duration_seconds_count', ours)).toBe(13);
    expect(
      sum(samples, 'fanout_agent_call_duration_seconds_bucket', { ...ours, status: 'ok', le: '1' }),
    ).toBeLessThanOrEqual(2);
    expect(sum(samples, 'fanout_agent_call_duration_seconds_bucket', { ...ours, status: 'ok', le: '+Inf' })).toBe(10);

    // The SDK's own metrics on the same endpoint.
    expect(
      sum(samples, 'temporal_activity_execution_latency_count', { task_queue: taskQueue, activity_type: 'callAgent' }),
    ).toBeGreaterThanOrEqual(13);
    expect(
      samples.some(
        (sample) => sample.name === 'temporal_worker_task_slots_used' && sample.labels.worker_type === 'ActivityWorker',
      ),
    ).toBe(true);
    expect(samples.some((sample) => sample.name === 'temporal_activity_schedule_to_start_latency_bucket')).toBe(true);

    // The dashboard queries only metrics the worker serves, and Prometheus answers every panel's query with data.
    const dashboardText = readFileSync(path.join(ROOT, 'deploy', 'grafana', 'fanout-dashboard.json'), 'utf8');
    const served = new Set(samples.map((sample) => sample.name));
    const queried = new Set([...dashboardText.matchAll(/\b(?:fanout|temporal)_[a-z0-9_]+/g)].map((match) => match[0]));
    expect(queried.size).toBeGreaterThan(5);
    expect([...queried].filter((name) => !served.has(name))).toEqual([]);
    const server = prometheus;
    await waitFor("Prometheus to scrape the run's final counts", async () => {
      const [calls] = await server.query(`sum(fanout_agent_calls_total{task_queue="${taskQueue}"})`);
      return calls?.value === '13';
    });
    const queries = dashboardQueries(JSON.parse(dashboardText));
    expect(queries.length).toBeGreaterThanOrEqual(12);
    for (const { title, expr } of queries) {
      // Grafana's variables as a user looking at this run would set them. A rate needs two scrapes of a series.
      const concrete = expr
        .replaceAll('$__rate_interval', '1m')
        .replaceAll('$namespace', 'default')
        .replaceAll('$task_queue', taskQueue);
      await waitFor(
        `data for the panel "${title}" (${concrete})`,
        async () => (await server.query(concrete)).length > 0,
        { timeoutMs: 15_000 },
      );
    }
    const [taskQueues] = await server.query(
      `count by (task_queue) (temporal_worker_task_slots_used{task_queue="${taskQueue}"})`,
    );
    expect(taskQueues?.labels.task_queue).toBe(taskQueue);
  });
});

describe('the metrics of one attempt', () => {
  const info = { attempt: 1, retryPolicy: { maximumAttempts: 3, nonRetryableErrorTypes: ['SourceChanged'] } };

  it('counts a retryable failure as retrying until the policy allows no further attempt', () => {
    const unavailable = ApplicationFailure.retryable('HTTP 500', FailureType.ProviderUnavailable);
    expect(failureOf(unavailable, info, false)).toEqual({ status: 'retrying', failureType: 'ProviderUnavailable' });
    expect(failureOf(unavailable, { ...info, attempt: 3 }, false)).toEqual({
      status: 'failed',
      failureType: 'ProviderUnavailable',
    });
    expect(failureOf(unavailable, { attempt: 9 }, false).status).toBe('retrying');
  });

  it('counts non-retryable failures and types the policy refuses as failed, and cancellation as cancelled', () => {
    expect(failureOf(ApplicationFailure.nonRetryable('HTTP 403', FailureType.Forbidden), info, false)).toEqual({
      status: 'failed',
      failureType: 'Forbidden',
    });
    expect(failureOf(ApplicationFailure.retryable('changed', FailureType.SourceChanged), info, false).status).toBe(
      'failed',
    );
    expect(failureOf(new CancelledFailure('cancelled'), info, false).status).toBe('cancelled');
    expect(failureOf(new Error('aborted'), info, true)).toEqual({ status: 'cancelled', failureType: 'Cancelled' });
  });

  it('reads the model from a callAgent input, and usage, cost and model from either agent activity result', () => {
    expect(requestOf({ task: { id: 'a', prompt: 'p', model: 'gpt-4o' }, inlineOutputBytes: 1 })).toEqual({
      model: 'gpt-4o',
    });
    expect(requestOf({ id: 'a', prompt: 'p', model: 'gpt-4o' })).toEqual({ model: 'gpt-4o' });
    expect(requestOf({ source: 's', entry: { id: 'a', offset: 0 } })).toEqual({});
    expect(
      answerOf({ model: 'm', usage: { promptTokens: 3, completionTokens: 4, totalTokens: 7 }, costUsd: 0.5 }),
    ).toEqual({
      model: 'm',
      usage: { promptTokens: 3, completionTokens: 4 },
      costUsd: 0.5,
    });
    expect(
      answerOf({
        id: 'a',
        usage: { promptTokens: 1, completionTokens: 2 },
        unpriced: true,
        line: { model: 'from-line' },
      }),
    ).toEqual({
      model: 'from-line',
      usage: { promptTokens: 1, completionTokens: 2 },
      unpriced: true,
    });
  });

  it('refuses a FANOUT_METRICS_PORT that is not a port, naming it', () => {
    expect(metricsEndpointFromEnvironment({})).toBeUndefined();
    expect(metricsEndpointFromEnvironment({ FANOUT_METRICS_PORT: '9464' })).toEqual({ port: 9464, host: '0.0.0.0' });
    expect(() => metricsEndpointFromEnvironment({ FANOUT_METRICS_PORT: '0' })).toThrow(
      /FANOUT_METRICS_PORT must be a port number from 1 to 65535, got "0"/,
    );
  });
});
