import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import OpenAI from 'openai';
import { createActivities } from '../src/activities';
import type { ChatDependencies } from '../src/llm/send-chat';
import { sendTaskChat } from '../src/llm/send-task-chat';
import { createLlmClient } from '../src/llm/llm-client';
import type { AgentCallResult } from '../src/contract/agent-call';
import { NON_RETRYABLE_FAILURE_TYPES } from '../src/contract/failure-types';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { FileStorage, PayloadStore, StorageError, type ObjectStorage } from '../src/store';
import { waitFor } from './support/wait-for';
import { activityEnvironment } from './support/activity-environment';
import { rejectionOf } from './support/rejection';

let simulator: Simulator;

beforeAll(async () => {
  simulator = await startSimulator({ latency: { minMs: 10, maxMs: 10 } });
});

afterAll(async () => {
  await simulator.close();
});

function activities() {
  return createActivities({
    llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'k' }),
    defaultModel: 'sim-model',
    heartbeatIntervalMs: 50,
  });
}

describe('the agent activity over real HTTP', () => {
  it('returns output, finish reason, usage, model and attempt of one chat completion', async () => {
    const environment = activityEnvironment({ attempt: 3 });
    const result: AgentCallResult = await environment.run(activities().callAgent, {
      id: 'a',
      system: 'You are terse.',
      prompt: 'Say hi',
      temperature: 0.2,
      maxTokens: 20,
    });
    expect(result).toMatchObject({ finishReason: 'stop', model: 'sim-model', attempt: 3 });
    expect(result.output).toContain('[simulated] as "You are terse." answer to: Say hi');
    expect(result.usage?.totalTokens).toBeGreaterThan(0);
    const [request] = simulator.log().filter((entry) => entry.taskId === 'a');
    expect(request.attempt).toBe(3);
  });

  it('heartbeats while the request is in flight', async () => {
    const environment = activityEnvironment();
    let heartbeats = 0;
    environment.on('heartbeat', () => (heartbeats += 1));
    await environment.run(activities().callAgent, { id: 'hb', prompt: 'wait [sim latency=400]' });
    expect(heartbeats).toBeGreaterThanOrEqual(4);
  });

  it('aborts the HTTP request when cancelled and throws CancelledFailure', async () => {
    const environment = activityEnvironment();
    const running = environment.run(activities().callAgent, { id: 'cancel-me', prompt: 'long [sim latency=60000]' });
    await waitFor('the request to arrive', () => simulator.log().some((entry) => entry.taskId === 'cancel-me'));
    environment.cancel();
    await expect(running).rejects.toBeInstanceOf(CancelledFailure);
    await waitFor(
      'the simulator to see the connection close',
      () => simulator.log().find((entry) => entry.taskId === 'cancel-me')?.clientClosedAt,
    );
  });

  it.each([
    ['429', 'RateLimited', false],
    ['500', 'ProviderUnavailable', false],
    ['503', 'ProviderUnavailable', false],
    ['400', 'BadRequest', true],
    ['401', 'Unauthorized', true],
    ['403', 'Forbidden', true],
    ['404', 'NotFound', true],
    ['422', 'Unprocessable', true],
    ['reset', 'ConnectionError', false],
    ['malformed', 'MalformedResponse', false],
  ])('maps a simulated %s to %s (non-retryable: %s)', async (fault, type, nonRetryable) => {
    const environment = activityEnvironment();
    const failure = await rejectionOf(
      environment.run(activities().callAgent, { id: `fault-${fault}`, prompt: `x [sim fault=${fault}]` }),
      ApplicationFailure,
    );
    expect(failure.type).toBe(type);
    expect(failure.nonRetryable).toBe(nonRetryable);
    expect(NON_RETRYABLE_FAILURE_TYPES.includes(failure.type as never)).toBe(nonRetryable);
    expect(failure.message).toContain(`agent "fault-${fault}" attempt 1`);
    expect(failure.details?.[0]).toMatchObject({ taskId: `fault-${fault}`, attempt: 1 });
  });

  it('turns Retry-After into the next retry delay', async () => {
    const environment = activityEnvironment();
    const failure = await rejectionOf(
      environment.run(activities().callAgent, { id: 'ra', prompt: 'x [sim fault=429 retry-after=7]' }),
      ApplicationFailure,
    );
    expect(failure.nextRetryDelay).toBe(7000);
    expect(failure.message).toContain('retry after 7000 ms');
  });

  it('times out a hung request at the attempt deadline as a retryable Timeout', async () => {
    const environment = activityEnvironment({ startToCloseTimeoutMs: 300 });
    const failure = await rejectionOf(
      environment.run(activities().callAgent, { id: 'hang', prompt: 'x [sim fault=hang]' }),
      ApplicationFailure,
    );
    expect(failure.type).toBe('Timeout');
    expect(failure.nonRetryable).toBe(false);
  });

  it('reports a connection refused as a retryable ConnectionError', async () => {
    const closed = await startSimulator();
    const baseURL = closed.baseUrl;
    await closed.close();
    const environment = activityEnvironment();
    const refused = createActivities({ llm: createLlmClient({ baseURL, apiKey: 'k' }) });
    const failure = await rejectionOf(
      environment.run(refused.callAgent, { id: 'refused', prompt: 'x' }),
      ApplicationFailure,
    );
    expect(failure.type).toBe('ConnectionError');
    expect(failure.nonRetryable).toBe(false);
  });
});

describe('one call inside an activity that runs several (a batch lane)', () => {
  function dependencies(llm = createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'k' })): ChatDependencies {
    return { llm, defaultModel: 'sim-model', clock: () => performance.now(), heartbeatIntervalMs: 1000 };
  }

  it("sends and returns the item's own attempt when the caller names it", async () => {
    const environment = activityEnvironment({ attempt: 1 });
    const result: AgentCallResult = await environment.run(() =>
      sendTaskChat({ id: 'own-attempt', prompt: 'x' }, dependencies(), { attempt: 4 }),
    );
    expect(result.attempt).toBe(4);
    expect(
      simulator
        .log()
        .filter((entry) => entry.taskId === 'own-attempt')
        .map((entry) => entry.attempt),
    ).toEqual([4]);
  });

  it("aborts the HTTP request when the caller's signal aborts, with that signal's reason", async () => {
    const environment = activityEnvironment();
    const lane = new AbortController();
    const running = environment.run(() =>
      sendTaskChat({ id: 'lane-ended', prompt: 'long [sim latency=60000]' }, dependencies(), { signal: lane.signal }),
    );
    await waitFor('the request to arrive', () => simulator.log().some((entry) => entry.taskId === 'lane-ended'));
    lane.abort(new Error('the lane ended'));
    await expect(running).rejects.toThrow('the lane ended');
    await waitFor(
      'the simulator to see the connection close',
      () => simulator.log().find((entry) => entry.taskId === 'lane-ended')?.clientClosedAt,
    );
  });

  it("lets the request's own deadline rule over the HTTP client's timeout (600 s by default, 300 ms here)", async () => {
    const environment = activityEnvironment({ startToCloseTimeoutMs: 10_000 });
    const llm = new OpenAI({ baseURL: simulator.baseUrl, apiKey: 'k', maxRetries: 0, timeout: 300 });
    const result: AgentCallResult = await environment.run(() =>
      sendTaskChat({ id: 'past-client-timeout', prompt: 'x [sim latency=1000]' }, dependencies(llm)),
    );
    expect(result.output).toContain('[simulated]');
  });
});

describe('a stored prompt that cannot be read', () => {
  it('fails PayloadUnavailable and is retried (bounded by the policy), as an item of a chunk is', async () => {
    const environment = activityEnvironment();
    const missing = { uri: '/nonexistent/temporal-fanout/prompt', bytes: 10, sha256: 'a'.repeat(64) };
    const failure = await rejectionOf(
      environment.run(activities().callAgent, {
        task: { id: 'gone', prompt: '', contentRef: missing },
        inlineOutputBytes: 1000,
      }),
      ApplicationFailure,
    );
    expect(failure.type).toBe('PayloadUnavailable');
    expect(failure.nonRetryable).toBe(false);
  });
});

describe('an answer whose store fails for a moment', () => {
  it('is stored on a later try, not paid for again by a retried activity', async () => {
    // Three writes refused as S3 refuses under load (503): the answer is in hand, so the write is tried again rather than
    // the activity failed (Temporal would retry it, and the model call with it).
    const storage = new FileStorage();
    let refusals = 3;
    const flaky: ObjectStorage = Object.create(storage) as ObjectStorage;
    flaky.write = async (uri, data, options) => {
      if (refusals > 0) {
        refusals -= 1;
        throw new StorageError('Unavailable', uri, 'SlowDown (503)');
      }
      return storage.write(uri, data, options);
    };
    const directory = mkdtempSync(path.join(tmpdir(), 'fanout-paid-answer-'));
    try {
      const activities = createActivities({
        llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'k' }),
        store: new PayloadStore(flaky, directory),
      });
      const result: AgentCallResult = await activityEnvironment().run(activities.callAgent, {
        task: { id: 'paid-once', prompt: 'x' },
        inlineOutputBytes: 1_000_000,
        storeOutput: true,
      });
      expect(result.outputRef?.uri.startsWith(directory)).toBe(true);
      expect(refusals).toBe(0);
      expect(simulator.log().filter((entry) => entry.taskId === 'paid-once')).toHaveLength(1);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});
