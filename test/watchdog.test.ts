import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { CallWatchdog, type CallWatchdogOptions } from '../src/watchdog/call-watchdog';
import { HostedRuns } from '../src/watchdog/hosted-runs';
import { Presence, PRESENCE_QUEUE, presencePollMs } from '../src/watchdog/presence';
import { waitFor } from './support/wait-for';

/**
 * The watchdog against a scripted Temporal: what its reads answer (or how they fail) is set per test, and what it did
 * (describes, failed calls, log lines) is recorded. The same code runs against the dev server in the economics and
 * worker tests; these cover what a real server cannot be made to do on cue.
 */
const { PendingActivityState, WorkflowExecutionStatus } = temporal.api.enums.v1;

interface Script {
  poll: () => Promise<unknown>;
  describe: (workflowId: string) => Promise<unknown>;
  pollers: () => { identity: string; lastAccessTime: { seconds: number } }[];
  /** The running workflows the sweep lists. Default none. */
  running?: () => { workflowId: string; runId: string }[];
  /** A heartbeat by id (the lost attempt's note). Default: answered at once. */
  heartbeat?: () => Promise<void>;
}

function fakeClient(script: Script) {
  const record = {
    describes: 0,
    polls: 0,
    failed: [] as { activityId: string; type?: string }[],
    heartbeats: 0,
    warnings: [] as string[],
    infos: [] as string[],
  };
  const connection = {
    // Like the client's Connection, a call ends with the signal; unlike it, its listener goes with the call (the
    // client's stays on the signal, and a presence loop polling under one signal passed ten within a minute here: a
    // worker's NativeConnection, which the watchdog runs on, ignores the signal).
    withAbortSignal: <R>(signal: AbortSignal, fn: () => Promise<R>) =>
      new Promise<R>((resolve, reject) => {
        if (signal.aborted) return reject(new Error('aborted'));
        const aborted = () => reject(new Error('aborted'));
        signal.addEventListener('abort', aborted, { once: true });
        fn()
          .then(resolve, reject)
          .finally(() => signal.removeEventListener('abort', aborted));
      }),
    withDeadline: <R>(_deadline: number, fn: () => Promise<R>) => fn(),
  };
  const client = {
    options: { namespace: 'default', identity: 'me' },
    connection,
    workflowService: {
      pollWorkflowTaskQueue: () => {
        record.polls += 1;
        return script.poll();
      },
      describeWorkflowExecution: (request: { execution: { workflowId: string } }) => {
        record.describes += 1;
        return script.describe(request.execution.workflowId);
      },
      describeTaskQueue: async (request: { taskQueue: { name: string } }) => {
        expect(request.taskQueue.name).toBe(PRESENCE_QUEUE);
        return { pollers: script.pollers() };
      },
    },
    activity: {
      fail: (id: { activityId: string }, failure: ApplicationFailure) => {
        record.failed.push({ activityId: id.activityId, type: failure.type ?? undefined });
        return Promise.resolve();
      },
      reportCancellation: () => Promise.resolve(),
      heartbeat: () => {
        record.heartbeats += 1;
        return script.heartbeat?.() ?? Promise.resolve();
      },
    },
    workflow: {
      list: async function* () {
        for (const run of script.running?.() ?? []) yield run;
      },
    },
  };
  const logger = {
    info: (message: string) => record.infos.push(message),
    warn: (message: string) => record.warnings.push(message),
  };
  return { client: client as unknown as Client, record, logger };
}

const options: CallWatchdogOptions = {
  watchIntervalMs: 100,
  lostAfterMs: 400,
  sweepIntervalMs: 60_000,
  sweepConcurrency: 1,
  idleMs: 60_000,
};
const idlePoll = () => new Promise((resolve) => setTimeout(() => resolve({}), 50));
const unavailable = () => Promise.reject(Object.assign(new Error('14 UNAVAILABLE: connection refused'), { code: 14 }));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const nowSeconds = () => Math.floor(Date.now() / 1000);

const watchdogs: CallWatchdog[] = [];
afterEach(async () => {
  for (const watchdog of watchdogs.splice(0)) await watchdog.stop();
});

function start(script: Script, overrides: Partial<CallWatchdogOptions> = {}) {
  const fake = fakeClient(script);
  const watchdog = new CallWatchdog(fake.client, 'me', { ...options, ...overrides }, fake.logger);
  watchdogs.push(watchdog);
  return { watchdog, ...fake };
}

function runningDescription(activities: unknown[] = []) {
  return Promise.resolve({
    workflowExecutionInfo: { status: WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING },
    pendingActivities: activities,
  });
}

/** A call started two minutes ago by the worker 'dead', which stopped polling a minute ago. */
const deadWorkersCall = () => ({
  activityId: 'theirs',
  state: PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
  attempt: 1,
  lastWorkerIdentity: 'dead',
  lastStartedTime: { seconds: nowSeconds() - 120 },
});

/** The pollers of the queue: this worker ('me'), live, and 'dead', last seen a minute ago. */
const meAndDeadPollers = () => [
  { identity: 'me', lastAccessTime: { seconds: nowSeconds() } },
  { identity: 'dead', lastAccessTime: { seconds: nowSeconds() - 60 } },
];

/** `activity` as the dev server describes a running attempt: with its retry policy, whose first interval is `ms`. */
const withFirstRetryAfter = <T extends object>(activity: T, ms: number) => ({
  ...activity,
  activityOptions: { retryPolicy: { initialInterval: { seconds: 0, nanos: ms * 1_000_000 } } },
});

const call = (activityId: string, abort?: (reason: unknown) => void) => ({
  workflowId: 'wf',
  runId: 'run',
  activityId,
  attempt: 1,
  poke: () => undefined,
  ...(abort ? { abort } : {}),
});

describe('the presence poll', () => {
  it('lasts 5 s at the default threshold and above, a third of a shorter one, and never 2 s or less', () => {
    expect([60_000, 15_000, 9000, 5500, 2000].map(presencePollMs)).toEqual([5000, 5000, 3000, 2500, 2500]);
  });
});

describe('a worker cut off from Temporal', () => {
  it('aborts its own calls with a retryable WorkerLost once its presence polls have failed for longer than the lost-worker threshold', async () => {
    // Longer than the other tests' threshold: on a loaded machine this process's timers can run 700 ms late, which a
    // 400 ms threshold took for a silence while the fake server answered every poll.
    const lostAfterMs = 2000;
    let reachable = true;
    // The last time the server saw this worker: the start of a poll it answered, or a describe it answered. The
    // threshold counts from there, which may be a poll's length before the cut.
    let lastContactAt = 0;
    const { watchdog, record } = start(
      {
        poll: () => {
          if (!reachable) return unavailable();
          const startedAt = Date.now();
          return idlePoll().then((answer) => {
            lastContactAt = Math.max(lastContactAt, startedAt);
            return answer;
          });
        },
        describe: () => {
          if (!reachable) return unavailable();
          lastContactAt = Math.max(lastContactAt, Date.now());
          return runningDescription();
        },
        pollers: () => {
          if (!reachable) throw Object.assign(new Error('14 UNAVAILABLE: connection refused'), { code: 14 });
          lastContactAt = Math.max(lastContactAt, Date.now());
          return [];
        },
      },
      { lostAfterMs },
    );
    const reasons: unknown[] = [];
    let abortedAt = 0;
    const abort = (reason: unknown) => {
      reasons.push(reason);
      abortedAt = Date.now();
    };
    watchdog.register(call('a', abort));
    watchdog.register(call('a', abort));
    // In touch: polls answer, nothing is aborted however long it runs.
    await sleep(lostAfterMs * 2);
    expect(reasons).toEqual([]);

    reachable = false;
    await waitFor('both calls of the activity to be aborted', () => reasons.length === 2, { timeoutMs: 5000 });
    // Less 20 ms: the watchdog stamps a presence read when it sends it, a little before the fake server sees it.
    expect(abortedAt - lastContactAt).toBeGreaterThanOrEqual(lostAfterMs - 20);
    for (const reason of reasons) {
      expect(reason).toBeInstanceOf(ApplicationFailure);
      expect((reason as ApplicationFailure).type).toBe('WorkerLost');
      expect((reason as ApplicationFailure).nonRetryable).toBe(false);
    }
    expect(record.warnings.filter((line) => line.startsWith('cut off from Temporal'))).toHaveLength(1);
  });

  it('keeps its calls while in touch though its presence polls are answered only at their deadline and nothing is described', async () => {
    // An empty poll lasts longer than the threshold; the run's workflow tasks run here, so it is not described either.
    const slowPoll = () => new Promise((resolve) => setTimeout(() => resolve({}), options.lostAfterMs * 3));
    const { watchdog, record } = start(
      { poll: slowPoll, describe: () => runningDescription(), pollers: () => [] },
      { hostedWatchIntervalMs: 60_000 },
    );
    const reasons: unknown[] = [];
    watchdog.hosted('wf', 'run');
    watchdog.register(call('a', (reason) => reasons.push(reason)));
    await sleep(options.lostAfterMs * 6);
    expect(record.describes).toBe(0);
    // Before: aborted as cut off once the first poll outlasted the threshold, with the server answering all along.
    expect(reasons).toEqual([]);
    expect(record.warnings).toEqual([]);
  });

  it('backs off while its reads fail: a few polls and describes a second, one warning each, not one per retry', async () => {
    const { watchdog, record } = start(
      { poll: unavailable, describe: unavailable, pollers: () => [] },
      { lostAfterMs: 600_000 },
    );
    watchdog.register(call('a'));
    await sleep(4000);
    // Unthrottled, these were a describe every 100 ms and a poll every 1.2 s with a warning each.
    expect(record.describes).toBeLessThan(12);
    expect(record.polls).toBeLessThan(12);
    expect(record.warnings).toHaveLength(2);
  });
});

describe("a dead worker's call when describes fail for a while", () => {
  it("is failed on the dead worker's behalf as soon as describes work again", async () => {
    let throttled = true;
    const dead = deadWorkersCall();
    const { watchdog, record } = start({
      poll: idlePoll,
      describe: () =>
        throttled
          ? Promise.reject(Object.assign(new Error('8 RESOURCE_EXHAUSTED'), { code: 8 }))
          : runningDescription([dead]),
      pollers: meAndDeadPollers,
    });
    watchdog.register(call('mine'));
    await waitFor('describes to have been refused twice', () => record.describes >= 2, { timeoutMs: 10_000 });
    expect(record.failed).toEqual([]);
    throttled = false;
    await waitFor("the dead worker's call to be failed", () => record.failed.length === 1, { timeoutMs: 10_000 });
    expect(record.failed).toEqual([{ activityId: 'theirs', type: 'WorkerLost' }]);
    expect(record.infos).toContain('describes work again');
  });
});

describe("a dead worker's call, acted on by its id", () => {
  // Temporal fails (or cancels) by id whichever attempt runs when the request arrives: a look that saw the dead worker's
  // attempt is acted on only if a look just before still shows it, younger than half the retry interval.
  it('is left alone once the look before acting shows its next attempt started on a live worker', async () => {
    let looks = 0;
    const { watchdog, record } = start({
      poll: idlePoll,
      describe: () => {
        looks += 1;
        // The first look sees the dead worker's attempt; by the next, another watchdog failed it and attempt 2 runs.
        return runningDescription([
          looks === 1
            ? deadWorkersCall()
            : {
                ...deadWorkersCall(),
                attempt: 2,
                lastWorkerIdentity: 'me',
                lastStartedTime: { seconds: nowSeconds() },
              },
        ]);
      },
      pollers: meAndDeadPollers,
    });
    watchdog.register(call('mine'));
    await waitFor('three looks', () => looks >= 3, { timeoutMs: 10_000 });
    expect(record.failed).toEqual([]);
  });

  it('waits for a look younger than half the retry interval, then fails it', async () => {
    let slow = true;
    // As the dev server describes a running attempt: its retry policy, not the wait before the next one.
    const dead = withFirstRetryAfter(deadWorkersCall(), 200);
    const { watchdog, record } = start({
      poll: idlePoll,
      // A look that takes 150 ms, longer than half the 200 ms a next attempt would wait: the attempt may have moved on.
      describe: () => (slow ? sleep(150).then(() => runningDescription([dead])) : runningDescription([dead])),
      pollers: meAndDeadPollers,
    });
    watchdog.register(call('mine'));
    await waitFor('four looks', () => record.describes >= 4, { timeoutMs: 10_000 });
    expect(record.failed).toEqual([]);
    slow = false;
    await waitFor("the dead worker's call to be failed", () => record.failed.length === 1, { timeoutMs: 10_000 });
    expect(record.failed).toEqual([{ activityId: 'theirs', type: 'WorkerLost' }]);
  });

  it('sends its note once, and fails it only on a look after a note that took longer than the look may be old', async () => {
    // A heartbeat restarts the attempt's heartbeat timeout: a note sent at every look would keep a dead attempt alive.
    const dead = withFirstRetryAfter(deadWorkersCall(), 200);
    const events: string[] = [];
    const { watchdog, record } = start({
      poll: idlePoll,
      // Each look says whether the call was failed before it.
      describe: () => {
        events.push(record.failed.length === 0 ? 'look' : 'look after the fail');
        return runningDescription([dead]);
      },
      pollers: meAndDeadPollers,
      // Longer than the 100 ms a look may be old here.
      heartbeat: () => sleep(150).then(() => void events.push('note')),
    });
    watchdog.register(call('mine'));
    await waitFor("the dead worker's call to be failed", () => record.failed.length === 1, { timeoutMs: 10_000 });
    await sleep(500);
    expect({
      notes: record.heartbeats,
      // The look that failed it came after the note: the one the note went on was too old by then.
      looksBetweenNoteAndFail: events.slice(events.indexOf('note') + 1).includes('look'),
      failed: record.failed,
    }).toEqual({ notes: 1, looksBetweenNoteAndFail: true, failed: [{ activityId: 'theirs', type: 'WorkerLost' }] });
  });
});

describe('the sweep over running workflows no live worker has calls in', () => {
  it('reaches every one in turn, not only the newest 5,000', async () => {
    const running = Array.from({ length: 12_000 }, (_, index) => ({ workflowId: `wf-${index}`, runId: 'run' }));
    const dead = deadWorkersCall();
    const { watchdog, record } = start(
      {
        poll: idlePoll,
        describe: (workflowId) => runningDescription(workflowId === 'wf-11000' ? [dead] : []),
        pollers: meAndDeadPollers,
        running: () => running,
      },
      { sweepIntervalMs: 20, sweepConcurrency: 8 },
    );
    watchdog.startSweeping('q');
    await waitFor('the call in the 11,001st workflow to be failed', () => record.failed.length === 1, {
      timeoutMs: 30_000,
    });
    expect(record.failed).toEqual([{ activityId: 'theirs', type: 'WorkerLost' }]);
  });

  it('stops once a whole round found no call of the stopped worker, and keeps going while one had some', async () => {
    // The server keeps a stopped worker in the presence table for some five minutes: every round listed and described
    // every running workflow until then, a worker restarted on purpose too.
    const deadAt = nowSeconds() - 60;
    const sweep = (calls: () => unknown[]) => {
      const fake = start(
        {
          poll: idlePoll,
          describe: () => runningDescription(calls()),
          // Its last poll stays where it was (a worker that polls again is judged afresh).
          pollers: () => [
            { identity: 'me', lastAccessTime: { seconds: nowSeconds() } },
            { identity: 'dead', lastAccessTime: { seconds: deadAt } },
          ],
          running: () => [
            { workflowId: 'wf-1', runId: 'run' },
            { workflowId: 'wf-2', runId: 'run' },
          ],
        },
        { sweepIntervalMs: 20 },
      );
      fake.watchdog.startSweeping('q');
      return fake.record;
    };
    const none = sweep(() => []);
    const some = sweep(() => [deadWorkersCall()]);
    // Past the presence table's 1 s reuse: later rounds read it afresh.
    await sleep(2500);
    expect(none.describes).toBe(2);
    expect(some.describes).toBeGreaterThan(20);
    // Its call in each of the two runs, once each.
    expect(some.failed).toEqual([
      { activityId: 'theirs', type: 'WorkerLost' },
      { activityId: 'theirs', type: 'WorkerLost' },
    ]);
  });
});

describe("a stopped worker's call in a run watched here", () => {
  it('is failed once the watch has ended, though the watch saw it too young to judge lost', async () => {
    const deadAt = nowSeconds() - 60;
    // Started (on the server's clock) after this worker's last poll as the first looks read it: not lost yet.
    const young = { ...deadWorkersCall(), lastStartedTime: { seconds: nowSeconds() + 1 } };
    const { watchdog, record } = start(
      {
        poll: idlePoll,
        describe: () => runningDescription([young]),
        pollers: () => [
          { identity: 'me', lastAccessTime: { seconds: nowSeconds() } },
          { identity: 'dead', lastAccessTime: { seconds: deadAt } },
        ],
        running: () => [{ workflowId: 'wf', runId: 'run' }],
      },
      { sweepIntervalMs: 50 },
    );
    const release = watchdog.register(call('mine'));
    watchdog.startSweeping('q');
    await sleep(200);
    expect(record.failed).toEqual([]);
    // This worker's own call in the run ends: nothing watches the run any more. Before, the sweep's rounds had left the
    // watched run out, found nothing and settled the stopped worker, and the call waited for its timeout.
    release();
    await waitFor("the stopped worker's call to be failed", () => record.failed.length === 1, { timeoutMs: 5000 });
    expect(record.failed).toEqual([{ activityId: 'theirs', type: 'WorkerLost' }]);
  });
});

describe('the runs hosted here', () => {
  it('settles at a look every activity that look was offered for, even one scheduled exactly the grace before it', () => {
    const runs = new HostedRuns();
    runs.scheduled('wf', 'run', 'a', 1000);
    // A look at 1100 with a 100 ms grace is offered the run (the activity is exactly the grace old)...
    expect(runs.toLookAt(100, 1100)).toEqual([{ workflowId: 'wf', runId: 'run' }]);
    // ... and what it finds settles that activity: the same bound, or the run is described again at the next round
    // (the one-in-thirty flake of 'describes ... a run once' below: two runs described twice, both scheduled that ms).
    expect(runs.awaitedOf('wf', 'run', 1100 - 100)).toEqual(['a']);
    expect(runs.awaitedOf('wf', 'run', 999)).toEqual([]);
  });
});

describe('the own-task check while no worker is silent', () => {
  /** A call Temporal records as started by this worker ('me'), which is not running it. */
  const ownLostCall = () => ({
    activityId: 'lost',
    state: PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
    attempt: 1,
    lastWorkerIdentity: 'me',
    lastStartedTime: { seconds: nowSeconds() },
  });
  const onlyMe = () => [{ identity: 'me', lastAccessTime: { seconds: nowSeconds() } }];

  it('fails a task of a run hosted here that this worker was handed and never ran, with no call of the run watched', async () => {
    const { watchdog, record } = start(
      { poll: idlePoll, describe: () => runningDescription([ownLostCall()]), pollers: onlyMe },
      { sweepIntervalMs: 100 },
    );
    watchdog.running.tracking = true;
    watchdog.hosted('wf', 'run', 'lost');
    watchdog.startSweeping('q');
    // Before: the check lived in the sweep's rounds, skipped while no worker was silent, so this waited for its timeout.
    await waitFor('the lost task to be failed', () => record.failed.length === 1, { timeoutMs: 5000 });
    expect(record.failed).toEqual([{ activityId: 'lost', type: 'WorkerLost' }]);
  });

  it("fails it only on a look younger than half the retry interval, as a lost worker's call", async () => {
    let slow = true;
    const lost = withFirstRetryAfter(ownLostCall(), 200);
    const { watchdog, record } = start(
      {
        poll: idlePoll,
        describe: () => (slow ? sleep(150).then(() => runningDescription([lost])) : runningDescription([lost])),
        pollers: onlyMe,
      },
      { sweepIntervalMs: 100 },
    );
    watchdog.running.tracking = true;
    watchdog.hosted('wf', 'run', 'lost');
    watchdog.startSweeping('q');
    await waitFor('eight looks', () => record.describes >= 8, { timeoutMs: 10_000 });
    expect(record.failed).toEqual([]);
    slow = false;
    await waitFor('the lost task to be failed', () => record.failed.length === 1, { timeoutMs: 5000 });
  });

  it('describes no hosted run whose activities started here, and a run once, after its activity ended or started elsewhere', async () => {
    const described: string[] = [];
    const { watchdog } = start(
      {
        poll: idlePoll,
        describe: (workflowId) => {
          described.push(workflowId);
          return runningDescription(
            workflowId === 'elsewhere'
              ? [
                  {
                    activityId: 'c',
                    state: PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
                    lastWorkerIdentity: 'peer',
                  },
                ]
              : [],
          );
        },
        pollers: onlyMe,
      },
      { sweepIntervalMs: 100 },
    );
    watchdog.running.tracking = true;
    watchdog.hosted('started-here', 'run', 'a');
    watchdog.running.onStart?.('started-here', 'run', 'a');
    watchdog.hosted('ended', 'run', 'b');
    watchdog.hosted('elsewhere', 'run', 'c');
    watchdog.hosted('finished', 'run', 'd');
    watchdog.finished('finished', 'run');
    watchdog.startSweeping('q');
    await sleep(1500);
    expect(described.sort()).toEqual(['elsewhere', 'ended']);
  });

  it('lists every running workflow now and then only while another worker is on the presence queue', async () => {
    const rounds = (pollers: () => { identity: string; lastAccessTime: { seconds: number } }[]) => {
      const fake = start(
        {
          poll: idlePoll,
          describe: () => runningDescription([]),
          pollers,
          running: () => [{ workflowId: 'wf', runId: 'run' }],
        },
        { sweepIntervalMs: 20 },
      );
      fake.watchdog.running.tracking = true;
      fake.watchdog.startSweeping('q');
      return fake.record;
    };
    const alone = rounds(onlyMe);
    const withPeer = rounds(() => [...onlyMe(), { identity: 'peer', lastAccessTime: { seconds: nowSeconds() } }]);
    await sleep(1000);
    // Tasks from runs hosted elsewhere need another worker to host them.
    expect(alone.describes).toBe(0);
    expect(withPeer.describes).toBeGreaterThan(0);
  });
});

describe('a workflow whose workflow tasks run on this worker (hosted)', () => {
  const cancelRequested = (activityId: string) => ({
    activityId,
    state: PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED,
    attempt: 1,
  });
  const running = (activityId: string) => ({
    activityId,
    state: PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
    attempt: 1,
  });

  it('is not described while nothing happens, and its cancelled call is poked within a fraction of a second of the notice', async () => {
    let cancelled = false;
    const { watchdog, record } = start(
      {
        poll: idlePoll,
        describe: () => runningDescription(cancelled ? [cancelRequested('a')] : []),
        pollers: () => [],
      },
      { hostedWatchIntervalMs: 60_000 },
    );
    let pokes = 0;
    watchdog.hosted('wf', 'run');
    watchdog.register({ ...call('a'), poke: () => (pokes += 1) });
    await sleep(1500);
    // Described every 100 ms (watchIntervalMs) were it run elsewhere.
    expect(record.describes).toBe(0);
    cancelled = true;
    const noticedAt = Date.now();
    watchdog.cancelNotice('wf', 'run');
    await waitFor('the cancelled call to be poked', () => pokes === 1, { timeoutMs: 5000 });
    expect(Date.now() - noticedAt).toBeLessThan(1000);
  });

  it("looks every watch interval at a run whose call asked for every look (a lane), and sees its cancel with no notice here: the run's tasks may have moved to another worker", async () => {
    let cancelled = false;
    const { watchdog, record } = start(
      {
        poll: idlePoll,
        describe: () => runningDescription(cancelled ? [cancelRequested('lane')] : []),
        pollers: () => [],
      },
      { hostedWatchIntervalMs: 60_000 },
    );
    let told = 0;
    watchdog.hosted('wf', 'run');
    // A hosted call of the same run first: the run's watch waits out the hosted interval until the lane comes.
    watchdog.register({ ...call('other'), poke: () => undefined });
    await sleep(300);
    expect(record.describes).toBe(0);
    watchdog.register({ ...call('lane'), poke: () => undefined, cancelRequested: () => (told += 1), everyLook: true });
    await waitFor('looks at the watch interval (100 ms)', () => record.describes >= 3, { timeoutMs: 2000 });
    // The cancel's notice went to the worker that now runs the run's tasks: none comes here.
    cancelled = true;
    const cancelledAt = Date.now();
    await waitFor('the lane told of its cancel', () => told === 1, { timeoutMs: 2000 });
    expect(Date.now() - cancelledAt).toBeLessThan(1000);
  });

  it('looks again at the watch interval after a notice that came before the server had the cancel', async () => {
    let describes = 0;
    const { watchdog } = start(
      {
        poll: idlePoll,
        // The first look after the notice still sees the call running; the server records the cancel after it.
        describe: () => {
          describes += 1;
          return runningDescription(describes > 1 ? [cancelRequested('a')] : []);
        },
        pollers: () => [],
      },
      { hostedWatchIntervalMs: 60_000 },
    );
    let pokes = 0;
    watchdog.hosted('wf', 'run');
    watchdog.register({ ...call('a'), poke: () => (pokes += 1) });
    watchdog.cancelNotice('wf', 'run');
    await waitFor('the cancelled call to be poked', () => pokes === 1, { timeoutMs: 2000 });
  });

  it('takes a notice that came just before its call registered', async () => {
    const { watchdog } = start(
      { poll: idlePoll, describe: () => runningDescription([cancelRequested('a')]), pollers: () => [] },
      { hostedWatchIntervalMs: 60_000 },
    );
    let pokes = 0;
    watchdog.hosted('wf', 'run');
    watchdog.cancelNotice('wf', 'run');
    watchdog.register({ ...call('a'), poke: () => (pokes += 1) });
    await waitFor('the cancelled call to be poked', () => pokes === 1, { timeoutMs: 2000 });
  });

  it('tells every cancelled activity of the run in the look that sees it, before any heartbeat answers, and once', async () => {
    let cancelled = false;
    const { watchdog } = start(
      {
        poll: idlePoll,
        describe: () => runningDescription(cancelled ? [cancelRequested('a'), cancelRequested('b'), running('c')] : []),
        pollers: () => [],
      },
      { hostedWatchIntervalMs: 60_000 },
    );
    const told: string[] = [];
    let pokes = 0;
    const lane = (activityId: string) => ({
      ...call(activityId),
      poke: () => (pokes += 1),
      cancelRequested: () => told.push(activityId),
    });
    watchdog.hosted('wf', 'run');
    watchdog.register(lane('a'));
    watchdog.register(lane('b'));
    watchdog.register(lane('c'));
    // A call of `a` without a hook of its own shares `a`'s entry: `a` is told once.
    watchdog.register(call('a'));
    cancelled = true;
    watchdog.cancelNotice('wf', 'run');
    await waitFor('the cancelled lanes to be told', () => told.length === 2, { timeoutMs: 2000 });
    // Both in the same turn as the look: the pokes (one per activity) come after the telling.
    expect({ told: told.sort(), pokes }).toEqual({ told: ['a', 'b'], pokes: 2 });
    // A call of `b` that registers after the look is told at once; later looks tell nobody again.
    watchdog.register(lane('b'));
    await sleep(300);
    expect(told.sort()).toEqual(['a', 'b', 'b']);
  });
});

describe('stopping', () => {
  it('says nothing when the connection closes under an open presence poll', async () => {
    const dropped = Object.assign(new Error('Native promise dropped'), { name: 'NativePromiseDroppedError' });
    const { watchdog, record } = start({
      poll: () => Promise.reject(dropped),
      describe: () => runningDescription(),
      pollers: () => [],
    });
    watchdog.register(call('a'))();
    await sleep(500);
    expect(record.polls).toBe(1);
    expect(record.warnings).toEqual([]);
  });

  it("stops at once under an open presence poll that its connection cannot abort (a worker's native connection)", async () => {
    let polls = 0;
    // NativeConnection ignores abort signals: its poll ends only at its deadline (5 s at the default threshold).
    const client = {
      options: { namespace: 'default' },
      connection: {
        withAbortSignal: <R>(_signal: AbortSignal, fn: () => Promise<R>) => fn(),
        withDeadline: <R>(_deadline: number, fn: () => Promise<R>) => fn(),
      },
      workflowService: {
        pollWorkflowTaskQueue: () => {
          polls += 1;
          return new Promise((resolve) => setTimeout(() => resolve({}), 5000).unref());
        },
      },
    } as unknown as Client;
    const warnings: unknown[] = [];
    const presence = new Presence(client, 'me', {
      failing: (error) => warnings.push(error),
      recovered: () => undefined,
    });
    presence.start();
    await waitFor('the poll to be open', () => polls === 1, { timeoutMs: 1000 });
    const stoppingAt = Date.now();
    await presence.stop();
    // Before: stop() waited for the poll's end, and every worker's shutdown with it.
    expect(Date.now() - stoppingAt).toBeLessThan(1000);
    expect(presence.running).toBe(false);
    expect(warnings).toEqual([]);
  });
});
