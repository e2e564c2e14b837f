import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventsQuery } from '../src/workflows/messages';
import { runCli } from './support/processes';
import { useTestStack } from './support/suite-stack';
import { waitFor } from './support/wait-for';

const suite = useTestStack({ worker: { heartbeatThrottleMs: 500 } });
const directory = mkdtempSync(path.join(tmpdir(), 'fanout-runs-'));

describe('events, token budget and the run commands', () => {
  it('keeps an event log readable with a cursor', async () => {
    const handle = await suite.stack.client.startParallel(
      [
        { id: 'good', prompt: 'x [sim latency=50]' },
        { id: 'bad', prompt: 'x [sim fault=404]' },
        { id: 'flaky', prompt: 'x [sim fault=500 times=1]' },
      ],
      { retry: { initialIntervalMs: 100 } },
    );
    await handle.result();
    const page = await handle.workflow.query(eventsQuery, 0);
    const types = page.events.map((event) => `${event.type}${event.taskId ? `:${event.taskId}` : ''}`);
    expect(types[0]).toBe('run-started');
    expect(types[types.length - 1]).toBe('run-finished');
    expect(types).toEqual(
      expect.arrayContaining([
        'agent-started:good',
        'agent-finished:good',
        'agent-failed:bad',
        'agent-retried:flaky',
        'agent-finished:flaky',
      ]),
    );
    expect(page.dropped).toBe(0);
    expect((await handle.workflow.query(eventsQuery, page.nextCursor)).events).toEqual([]);
    const middle = await handle.workflow.query(eventsQuery, 2);
    expect(middle.events[0].seq).toBe(3);
  });

  it('stops starting agents once the token budget is spent and reports the rest skipped', async () => {
    const { results, metrics } = await suite.stack.client.runParallel(
      [1, 2, 3].map((index) => ({ id: `b${index}`, prompt: 'a prompt of several words [sim latency=10]' })),
      { maxParallel: 1, tokenBudget: 5 },
    );
    expect(results.map((result) => result.status)).toEqual(['ok', 'skipped', 'skipped']);
    expect(results[1].error?.type).toBe('BudgetExhausted');
    expect(metrics.skipped).toBe(2);
  });

  it('shows status, results, a watched run, the list, and cancels', async () => {
    const tasks = path.join(directory, 'watch.jsonl');
    writeFileSync(
      tasks,
      [
        JSON.stringify({ id: 'w1', prompt: 'x [sim latency=300]' }),
        JSON.stringify({ id: 'w2', prompt: 'x [sim latency=600]' }),
      ].join('\n'),
    );
    const watched = await runCli([
      'run',
      tasks,
      '--watch',
      '--id',
      'watched-run',
      '--name',
      'nightly report',
      ...suite.connectionArgs,
    ]);
    expect(watched.code).toBe(0);
    expect(watched.stdout).toMatch(/agent-finished w1/);
    expect(watched.stdout).toMatch(/agent-finished w2/);
    expect(watched.stdout).toContain('run-finished');
    expect(watched.stdout).toContain('parallelism efficiency');

    const status = await runCli(['status', 'watched-run', ...suite.connectionArgs]);
    expect(status.stdout).toContain('fanOut watched-run: completed');
    expect(status.stdout).toContain('2/2 done: ok 2');

    const results = await runCli(['results', 'watched-run', '--jsonl', ...suite.connectionArgs]);
    expect(
      results.stdout
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { id: string }).id),
    ).toEqual(['w1', 'w2']);

    const list = await runCli(['list', ...suite.connectionArgs]);
    expect(list.stdout).toMatch(/COMPLETED\s+fanOut\s+watched-run/);
    // Found by its name through the FanoutName search attribute (visibility may lag a moment).
    await waitFor('the run to be listed by name', async () =>
      (await runCli(['list', '--name', 'nightly report', '--json', ...suite.connectionArgs])).stdout.includes(
        '"watched-run"',
      ),
    );
    const byOtherName = await runCli(['list', '--name', 'something else', '--json', ...suite.connectionArgs]);
    expect(JSON.parse(byOtherName.stdout)).toEqual([]);

    const long = await suite.stack.client.startParallel(
      [{ id: 'long', prompt: 'x [sim latency=60000]' }],
      {},
      { workflowId: 'to-cancel' },
    );
    await waitFor('the call to start', () =>
      suite.servers.simulator.log().some((request) => request.workflowId === 'to-cancel'),
    );
    const cancelled = await runCli(['cancel', 'to-cancel', ...suite.connectionArgs]);
    expect(cancelled.code).toBe(0);
    await expect(long.result()).rejects.toThrow();
    const after = await runCli(['results', 'to-cancel', ...suite.connectionArgs]);
    expect(after.code).toBe(1);
    expect(after.stderr).toContain('run to-cancel ended cancelled');
  });

  it('exits 1 from `fanout run` of a run cancelled while it waits, saying how far it got', async () => {
    const file = path.join(directory, 'cancelled-run.jsonl');
    writeFileSync(
      file,
      [
        { id: 'quick', prompt: 'x [sim latency=10]' },
        { id: 'slow', prompt: 'x [sim latency=60000]' },
      ]
        .map((task) => JSON.stringify(task))
        .join('\n'),
    );
    const running = runCli(['run', file, '--id', 'run-then-cancel', ...suite.connectionArgs]);
    await waitFor('the slow call to start', () =>
      suite.servers.simulator
        .log()
        .some((request) => request.workflowId === 'run-then-cancel' && request.taskId === 'slow'),
    );
    expect((await runCli(['cancel', 'run-then-cancel', ...suite.connectionArgs])).code).toBe(0);
    const ran = await running;
    expect(ran.code).toBe(1);
    expect(ran.stderr).toContain('run run-then-cancel ended cancelled after 1 of 2 agents answered: it has no results');
  });
});

describe('fanout dev', () => {
  it('keeps a dev server, worker and simulator up for other commands until interrupted', async () => {
    const { spawn } = await import('node:child_process');
    const { CLI } = await import('./support/paths');
    const child = spawn(process.execPath, [CLI, 'dev'], {
      env: { ...process.env, OPENAI_API_KEY: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    try {
      const address = await waitFor('the dev stack', () => /export TEMPORAL_ADDRESS=(\S+)/.exec(output)?.[1], {
        timeoutMs: 60_000,
      });
      expect(output).toContain('(SIMULATED)');
      const tasks = path.join(directory, 'dev.jsonl');
      writeFileSync(tasks, JSON.stringify({ id: 'hello', prompt: 'Say hello' }));
      const ran = await runCli(['run', tasks, '--json'], { TEMPORAL_ADDRESS: address, FANOUT_TASK_QUEUE: 'fanout' });
      expect(ran.code).toBe(0);
      expect(JSON.parse(ran.stdout).results[0].output).toContain('[simulated]');
    } finally {
      child.kill('SIGINT');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    expect(child.exitCode).toBe(0);
  });
});
