import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { WorkflowFailedError } from '@temporalio/client';
import { CancelledFailure, ApplicationFailure } from '@temporalio/common';
import type { AgentTask } from '../src/contract/agent-task';
import { InvalidInputError } from '../src/contract/validation';
import { decodePayload, pendingActivities } from './support/history';
import { maxOverlap } from './support/overlap';
import { useTestStack } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

const run = promisify(execFile);
const API_KEY = `sk-test-${uniqueName('secret')}`;

const suite = useTestStack({
  simulator: { requireApiKey: API_KEY, latency: { minMs: 20, maxMs: 20 } },
  worker: { apiKey: API_KEY, heartbeatThrottleMs: 500 },
});

function requestsOf(workflowId: string, taskId?: string) {
  return suite.servers.simulator
    .log()
    .filter((request) => request.workflowId === workflowId && (taskId === undefined || request.taskId === taskId));
}

function task(id: string, marker: string, extra: Partial<AgentTask> = {}): AgentTask {
  return { id, prompt: `task ${id} [sim ${marker}]`, ...extra };
}

/** A task per entry, in order: its id, and the simulator markers of its prompt. */
function tasksOf(markers: Record<string, string>): AgentTask[] {
  return Object.entries(markers).map(([id, marker]) => task(id, marker));
}

describe('fanOut on a real dev server', () => {
  it('returns results in input order when later tasks finish first', async () => {
    const tasks = tasksOf({ slow: 'latency=1200', medium: 'latency=700', fast: 'latency=250', fastest: 'latency=10' });
    const handle = await suite.stack.client.startParallel(tasks);
    const { results } = await handle.result();

    expect(results.map((result) => result.id)).toEqual(['slow', 'medium', 'fast', 'fastest']);
    expect(results.every((result) => result.status === 'ok')).toBe(true);
    expect(results[0].output).toContain('[simulated]');
    expect(results[0].output).toContain('task slow');
    const finishedOrder = requestsOf(handle.workflowId)
      .sort((a, b) => (a.respondedAt ?? 0) - (b.respondedAt ?? 0))
      .map((request) => request.taskId);
    expect(finishedOrder).toEqual(['fastest', 'fast', 'medium', 'slow']);
  });

  it('takes well under half the sum of its agents when latencies spread 0.3-1.5 s', async () => {
    const latencies = [300, 470, 640, 810, 980, 1150, 1320, 1500];
    const sum = latencies.reduce((total, value) => total + value, 0);
    const startedAt = Date.now();
    const { results, metrics } = await suite.stack.client.runParallel(
      latencies.map((ms, index) => task(`t${index}`, `latency=${ms}`)),
    );
    const wall = Date.now() - startedAt;

    expect(results.every((result) => result.status === 'ok')).toBe(true);
    // Sequential waiting would take the sum (7.2 s); concurrent waiting takes about the slowest (1.5 s).
    expect(wall).toBeLessThan(sum / 2);
    expect(metrics.wallMs).toBeLessThan(sum / 2);
    expect(metrics.parallelismEfficiency).toBeGreaterThan(2);
    expect(metrics.slowestTaskMs).toBeGreaterThanOrEqual(1500);
  });

  it('never has more than maxParallel requests in flight at the simulator', async () => {
    const tasks = Array.from({ length: 6 }, (_, index) => task(`p${index}`, 'latency=400'));
    const handle = await suite.stack.client.startParallel(tasks, { maxParallel: 2 });
    const { results } = await handle.result();

    expect(results.every((result) => result.status === 'ok')).toBe(true);
    const requests = requestsOf(handle.workflowId);
    expect(requests).toHaveLength(6);
    expect(maxOverlap(requests)).toBe(2);
  });

  it('retries a 429 no sooner than its Retry-After, then succeeds, without using up an attempt', async () => {
    const handle = await suite.stack.client.startParallel(
      [task('limited', 'fault=429 times=1 retry-after=2 latency=10')],
      {
        // Without Retry-After the retry would come after 100 ms.
        retry: { initialIntervalMs: 100, maximumAttempts: 3 },
      },
    );
    const { results } = await handle.result();

    // A 429 is waited out inside the attempt (docs/ARCHITECTURE.md, "Economics"): attempts are for real failures.
    expect(results[0]).toMatchObject({ status: 'ok', attempts: 1 });
    const requests = requestsOf(handle.workflowId, 'limited');
    expect(requests.map((request) => [request.attempt, request.outcome])).toEqual([
      [1, 429],
      [1, 200],
    ]);
    expect(requests[1].arrivedAt - (requests[0].respondedAt ?? Number.NaN)).toBeGreaterThanOrEqual(2000);
  });

  it('tries a 401 exactly once and reports it failed while its siblings succeed under continue', async () => {
    const handle = await suite.stack.client.startParallel(
      [task('ok-1', 'latency=300'), task('unauthorized', 'fault=401'), task('ok-2', 'latency=300')],
      { errorPolicy: 'continue', retry: { initialIntervalMs: 100 } },
    );
    const { results, metrics } = await handle.result();

    expect(results.map((result) => result.status)).toEqual(['ok', 'failed', 'ok']);
    expect(results[1].error?.type).toBe('Unauthorized');
    expect(results[1].error?.message).toMatch(/HTTP 401.*OPENAI_API_KEY/);
    expect(results[1].attempts).toBe(1);
    expect(requestsOf(handle.workflowId, 'unauthorized')).toHaveLength(1);
    expect(metrics.successRate).toBeCloseTo(2 / 3);
  });

  it('fails fast: cancels the running siblings, closes their connections and leaves no pending activity', async () => {
    const tasks = [
      task('doomed', 'fault=401 latency=300'),
      task('long-1', 'latency=60000'),
      task('long-2', 'latency=60000'),
      task('queued', 'latency=10'),
    ];
    const startedAt = Date.now();
    const handle = await suite.stack.client.startParallel(tasks, { errorPolicy: 'fail-fast', maxParallel: 3 });
    const result = await handle.result();

    expect(Date.now() - startedAt).toBeLessThan(30_000);
    expect(result.stoppedBy).toBe('fail-fast');
    expect(result.results.map((agent) => agent.status)).toEqual(['failed', 'cancelled', 'cancelled', 'cancelled']);
    expect(result.results[3]).toMatchObject({ attempts: 0, error: { type: 'NotStarted' } });
    for (const id of ['long-1', 'long-2']) {
      const [request] = requestsOf(handle.workflowId, id);
      expect(request.clientClosedAt).toBeDefined();
      expect(request.respondedAt).toBeUndefined();
    }
    expect(requestsOf(handle.workflowId, 'queued')).toHaveLength(0);
    expect(await pendingActivities(handle.workflow)).toBe(0);
  });

  it('cancelling the workflow aborts the in-flight requests and leaves no pending activity', async () => {
    const tasks = [task('c1', 'latency=60000'), task('c2', 'latency=60000'), task('c3', 'latency=60000')];
    const handle = await suite.stack.client.startParallel(tasks);
    await waitFor('three requests at the simulator', () => requestsOf(handle.workflowId).length === 3);
    const progress = await handle.progress();
    expect(progress).toMatchObject({ total: 3, running: 3, done: 0 });

    await handle.cancel();
    const error = await handle.result().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    expect((error as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);

    const requests = requestsOf(handle.workflowId);
    expect(requests).toHaveLength(3);
    expect(requests.every((request) => request.clientClosedAt !== undefined)).toBe(true);
    expect((await handle.workflow.describe()).status.name).toBe('CANCELLED');
    expect(await pendingActivities(handle.workflow)).toBe(0);
  });

  it('answers the progress query with counts and per-task states while running', async () => {
    const handle = await suite.stack.client.startParallel([
      task('quick', 'latency=10'),
      task('slowish', 'latency=3000'),
    ]);
    const progress = await waitFor('one task done', async () => {
      const current = await handle.progress();
      return current.done === 1 ? current : undefined;
    });
    expect(progress).toMatchObject({ total: 2, done: 1, succeeded: 1, running: 1, pending: 0 });
    expect(progress.tasks).toEqual([
      { id: 'quick', name: 'quick', state: 'ok', attempts: 1 },
      { id: 'slowish', name: 'slowish', state: 'running', attempts: 1 },
    ]);
    await handle.result();
    expect(await handle.progress()).toMatchObject({ done: 2, succeeded: 2, running: 0 });
  });

  it('reports metrics: tokens, percentiles and efficiency', async () => {
    const { metrics, results } = await suite.stack.client.runParallel([
      task('m1', 'latency=200'),
      task('m2', 'latency=400'),
    ]);
    expect(metrics).toMatchObject({ total: 2, succeeded: 2, failed: 0, successRate: 1 });
    expect(metrics.tokens.total).toBe(results.reduce((sum, result) => sum + (result.usage?.totalTokens ?? 0), 0));
    expect(metrics.tokens.total).toBeGreaterThan(0);
    expect(metrics.p50TaskMs).toBeLessThanOrEqual(metrics.p95TaskMs);
    expect(metrics.sumTaskMs).toBe(results[0].durationMs + results[1].durationMs);
  });

  it('shows a run summary and each agent name as its activity summary in the Temporal UI', async () => {
    const handle = await suite.stack.client.startParallel([
      task('a', 'latency=10', { name: 'Researcher' }),
      task('b', 'latency=10', { name: 'Writer' }),
    ]);
    await handle.result();
    const description = await handle.workflow.describe();
    expect(await description.staticSummary()).toBe('Fan-out of 2 agents');
    const history = await handle.workflow.fetchHistory();
    const summaries = (history.events ?? [])
      .filter((event) => event.activityTaskScheduledEventAttributes)
      .map((event) => decodePayload(event.userMetadata?.summary));
    expect(summaries).toEqual(['Researcher', 'Writer']);
  });

  it('is started by the temporal CLI by type name with JSON input and returns the ordered result', async () => {
    const cli = process.env.TEMPORAL_CLI as string;
    const workflowId = uniqueName('cli');
    const input = { tasks: [task('x', 'latency=600'), task('y', 'latency=10')], options: { maxParallel: 2 } };
    const connection = ['--address', suite.servers.server.address, '--namespace', 'default'];
    await run(cli, [
      'workflow',
      'start',
      '--type',
      'fanOut',
      '--task-queue',
      suite.stack.taskQueue,
      '--workflow-id',
      workflowId,
      '--input',
      JSON.stringify(input),
      ...connection,
    ]);
    const { stdout } = await run(cli, [
      'workflow',
      'result',
      '--workflow-id',
      workflowId,
      '--output',
      'json',
      ...connection,
    ]);
    const printed = JSON.parse(stdout) as { result: { results: { id: string; status: string }[] } };
    expect(printed.result.results.map((result) => [result.id, result.status])).toEqual([
      ['x', 'ok'],
      ['y', 'ok'],
    ]);
  });

  it('never writes the API key into the run history', async () => {
    const handle = await suite.stack.client.startParallel([task('secret-check', 'latency=10')]);
    const { results } = await handle.result();
    // The simulator requires the key, so the call's success proves the worker sent it.
    expect(results[0].status).toBe('ok');
    const { stdout } = await run(
      process.env.TEMPORAL_CLI as string,
      [
        'workflow',
        'show',
        '--workflow-id',
        handle.workflowId,
        '--output',
        'json',
        '--address',
        suite.servers.server.address,
      ],
      { maxBuffer: 64 * 1024 * 1024 },
    );
    expect(stdout.length).toBeGreaterThan(100);
    expect(stdout).toContain('secret-check');
    expect(stdout).not.toContain(API_KEY);
    expect(stdout).not.toContain(Buffer.from(API_KEY).toString('base64'));
  });

  it('refuses bad input in the client before anything starts, naming the field', async () => {
    const before = suite.servers.simulator.log().length;
    await expect(suite.stack.client.startParallel([{ id: 'a', prompt: '' }])).rejects.toThrow(
      /tasks\[0\]\.prompt: must not be empty/,
    );
    await expect(suite.stack.client.startParallel([task('d', 'latency=1'), task('d', 'latency=1')])).rejects.toThrow(
      /tasks\[1\]\.id: duplicate id "d" \(first at tasks\[0\]\)/,
    );
    await expect(suite.stack.client.startParallel([task('a', 'latency=1')], { maxParallel: 0 })).rejects.toThrow(
      InvalidInputError,
    );
    await expect(suite.stack.client.startParallel([task('a', 'latency=1')], { maxParallel: 0 })).rejects.toThrow(
      /options\.maxParallel/,
    );
    await expect(suite.stack.client.startParallel([])).rejects.toThrow(/tasks: must hold at least one task/);
    expect(suite.servers.simulator.log().length).toBe(before);
  });

  it('fails a run started with bad input at once and non-retryably, naming the field', async () => {
    const workflowId = uniqueName('bad');
    const handle = await suite.servers.server.client.workflow.start('fanOut', {
      taskQueue: suite.stack.taskQueue,
      workflowId,
      args: [{ tasks: [{ id: 'ok', prompt: 'fine' }, { id: 'broken' }], options: { errorPolicy: 'sometimes' } }],
    });
    const error = await handle.result().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    const cause = (error as WorkflowFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect((cause as ApplicationFailure).type).toBe('InvalidInput');
    expect((cause as ApplicationFailure).message).toContain('tasks[1].prompt');
    expect((cause as ApplicationFailure).message).toContain('options.errorPolicy');
    expect(requestsOf(workflowId)).toHaveLength(0);
  });
});
