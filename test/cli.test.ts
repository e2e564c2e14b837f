import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { runBatchStart, runCli, startCli } from './support/processes';
import { useTestStack } from './support/suite-stack';
import { waitFor } from './support/wait-for';

const directory = mkdtempSync(path.join(tmpdir(), 'fanout-cli-'));
function file(name: string, content: string): string {
  const target = path.join(directory, name);
  writeFileSync(target, content);
  return target;
}

// Nothing listens here: a command that validates first fails on the input, never on the connection.
const NOWHERE = ['--address', '127.0.0.1:1'];

describe('fanout CLI input errors (nothing is started)', () => {
  it('names the line of bad JSON in a .jsonl file and exits 2', async () => {
    const tasks = file('bad-json.jsonl', '{"id":"a","prompt":"x"}\n{"id":"b","prompt":\n');
    const { code, stderr } = await runCli(['run', tasks, ...NOWHERE]);
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toContain('bad-json.jsonl line 2: not valid JSON');
  });

  it('names the line and field of a missing prompt and of a duplicate id', async () => {
    const tasks = file('bad-fields.jsonl', '{"id":"a","prompt":"x"}\n\n{"id":"b"}\n{"id":"a","prompt":"y"}\n');
    const { code, stderr } = await runCli(['run', tasks, ...NOWHERE]);
    expect(code).toBe(2);
    expect(stderr).toContain('bad-fields.jsonl line 3: prompt: is required');
    expect(stderr).toContain('bad-fields.jsonl line 4: id: duplicate id "a" (first at line 1)');
  });

  it('names bad options inside a .json file', async () => {
    const tasks = file(
      'bad-options.json',
      JSON.stringify({ tasks: [{ id: 'a', prompt: 'x' }], options: { maxParallel: 9999, colour: 'red' } }),
    );
    const { code, stderr } = await runCli(['run', tasks, ...NOWHERE]);
    expect(code).toBe(2);
    expect(stderr).toContain('options.maxParallel');
    expect(stderr).toContain('unknown field "colour"');
  });

  it('refuses an out-of-range flag with one line and exit code 2', async () => {
    const tasks = file('fine.jsonl', '{"id":"a","prompt":"x"}\n');
    const { code, stderr } = await runCli(['run', tasks, '--parallel', '0', ...NOWHERE]);
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/--parallel.*expected a whole number from 1 to 500, got "0"/);
  });

  it('refuses --cache replay without a cache location, a cache location it cannot write, and an unknown mode', async () => {
    const tasks = file('cached.jsonl', '{"id":"a","prompt":"x"}\n');
    const replay = await runCli(['run', tasks, '--cache', 'replay', ...NOWHERE], {
      FANOUT_STORE: '',
      FANOUT_CACHE_STORE: '',
    });
    expect(replay.code).toBe(2);
    expect(replay.stderr).toContain('replay needs a cache location');
    expect(replay.stderr).toContain('FANOUT_CACHE_STORE');
    const unwritable = await runCli(
      ['run', tasks, '--cache', 'read-write', '--cache-store', path.join(tasks, 'cache'), ...NOWHERE],
      {},
    );
    expect(unwritable.code).toBe(2);
    expect(unwritable.stderr).toContain(`the cache location ${path.join(tasks, 'cache')} cannot be written`);
    const unknown = await runCli(['run', tasks, '--cache', 'sometimes', ...NOWHERE]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('"sometimes" is not a cache mode (use read-write, read-only, replay, off)');
  });

  it('says clearly when the task file does not exist', async () => {
    const { code, stderr } = await runCli(['run', path.join(directory, 'missing.jsonl'), ...NOWHERE]);
    expect(code).toBe(2);
    expect(stderr).toContain('missing.jsonl: cannot be read (ENOENT)');
  });

  it('refuses non-UTF-8 bytes, naming the line, instead of sending replacement characters to a model', async () => {
    const tasks = path.join(directory, 'latin1.jsonl');
    writeFileSync(
      tasks,
      Buffer.concat([
        Buffer.from('{"id":"a","prompt":"fine"}\n{"id":"b","prompt":"caf'),
        Buffer.from([0xe9]),
        Buffer.from('"}\n'),
      ]),
    );
    const { code, stderr } = await runCli(['run', tasks, ...NOWHERE]);
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toContain('latin1.jsonl line 2: is not valid UTF-8');
  });

  it('accepts a UTF-8 byte-order mark, and refuses deeply nested JSON with a message rather than a stack overflow', async () => {
    const bom = path.join(directory, 'bom.json');
    writeFileSync(
      bom,
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('[{"id":"a","prompt":"x","maxTokens":0}]')]),
    );
    const withBom = await runCli(['run', bom, ...NOWHERE]);
    // Parsed past the mark: the complaint is about the task's field, not the file's first byte.
    expect(withBom.code).toBe(2);
    expect(withBom.stderr).toContain('tasks[0].maxTokens');

    const deep = file('deep.json', `${'['.repeat(200_000)}${']'.repeat(200_000)}`);
    const nested = await runCli(['run', deep, ...NOWHERE]);
    expect(nested.code).toBe(2);
    expect(nested.stderr.trim().split('\n')).toHaveLength(1);
    expect(nested.stderr).toContain('deep.json: [0][0][0][0][0][0]... is nested deeper than 64 levels');
    // Deep inside a task, the message names the field.
    const deepField = file(
      'deep-field.json',
      `[{"id":"a","prompt":"x","metadata":{"notes":${'['.repeat(100)}${']'.repeat(100)}}}]`,
    );
    const field = await runCli(['run', deepField, ...NOWHERE]);
    expect(field.code).toBe(2);
    expect(field.stderr).toContain('[0].metadata.notes[0][0][0]... is nested deeper than 64 levels');
  });

  it('refuses an empty or over-long workflow id before starting', async () => {
    const tasks = file('ids.jsonl', '{"id":"a","prompt":"x"}\n');
    const empty = await runCli(['run', tasks, '--id', '', ...NOWHERE]);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('the workflow id: must not be empty');
    const long = await runCli(['run', tasks, '--id', 'x'.repeat(1001), ...NOWHERE]);
    expect(long.code).toBe(2);
    expect(long.stderr).toContain('the workflow id: is 1001 characters; the limit is 1000');
  });

  it('prints help for each command', async () => {
    for (const command of ['run', 'worker', 'sim', 'demo']) {
      const { code, stdout } = await runCli([command, '--help']);
      expect(code).toBe(0);
      expect(stdout).toContain(`Usage: fanout ${command}`);
    }
  });
});

describe('fanout run against a real dev server', () => {
  const suite = useTestStack();

  it('prints results in input order and metrics, and exits 0 when every agent succeeds', async () => {
    const tasks = file(
      'ok.jsonl',
      ['a', 'b', 'c']
        .map((id, index) =>
          JSON.stringify({ id, name: `Agent ${id}`, prompt: `hi [sim latency=${600 - index * 250}]` }),
        )
        .join('\n'),
    );
    const { code, stdout, stderr } = await runCli(['run', tasks, ...suite.connectionArgs]);
    expect(stderr).toContain('Temporal UI: http');
    expect(code).toBe(0);
    const rows = stdout.split('\n').filter((line) => /^\d+\s/.test(line));
    expect(rows.map((row) => row.split(/\s{2,}/)[1])).toEqual(['Agent a', 'Agent b', 'Agent c']);
    expect(stdout).toContain('parallelism efficiency');
    expect(stdout).toContain('success rate: 100.0%');
  });

  it('prints JSON with --json and exits 1 when an agent failed', async () => {
    const tasks = file(
      'one-fails.json',
      JSON.stringify([
        { id: 'good', prompt: 'x [sim latency=10]' },
        { id: 'bad', prompt: 'x [sim fault=403]' },
      ]),
    );
    const { code, stdout } = await runCli(['run', tasks, '--json', ...suite.connectionArgs]);
    expect(code).toBe(1);
    const printed = JSON.parse(stdout) as { results: { id: string; status: string; error?: { type: string } }[] };
    expect(printed.results.map((result) => [result.id, result.status, result.error?.type])).toEqual([
      ['good', 'ok', undefined],
      ['bad', 'failed', 'Forbidden'],
    ]);
  });

  it('cancels the others under --fail-fast', async () => {
    const tasks = file(
      'fail-fast.jsonl',
      [
        JSON.stringify({ id: 'bad', prompt: 'x [sim fault=400 latency=200]' }),
        JSON.stringify({ id: 'long', prompt: 'x [sim latency=60000]' }),
      ].join('\n'),
    );
    const { code, stdout } = await runCli(['run', tasks, '--fail-fast', '--json', ...suite.connectionArgs]);
    expect(code).toBe(1);
    const printed = JSON.parse(stdout) as { results: { status: string }[]; stoppedBy: string };
    expect(printed.results.map((result) => result.status)).toEqual(['failed', 'cancelled']);
    expect(printed.stoppedBy).toBe('fail-fast');
  });
});

describe('fanout demo (what npm start runs)', () => {
  it('runs the demo fan-out on the embedded default and leaves nothing running', async () => {
    const { code, stdout, stderr } = await runCli(['demo'], { OPENAI_API_KEY: '' });
    expect(code).toBe(0);
    expect(stderr).toContain('SIMULATED');
    const rows = stdout.split('\n').filter((line) => /^\d+\s/.test(line));
    expect(rows.map((row) => row.split(/\s{2,}/)[1])).toEqual([
      'Researcher',
      'Analyst',
      'Fact checker',
      'Coder',
      'Editor',
    ]);
    expect(stdout).toMatch(/parallelism efficiency: \d+\.\d+x/);
    expect(stdout).toMatch(
      /Temporal UI for this run: http:\/\/127\.0\.0\.1:\d+\/namespaces\/default\/workflows\/fanout-/,
    );
    const uiPort = /127\.0\.0\.1:(\d+)\/namespaces/.exec(stdout)?.[1];
    // The dev server the demo started is gone.
    const listening = execFileSync('bash', ['-c', `ss -ltn 'sport = :${uiPort}' | tail -n +2`], { encoding: 'utf8' });
    expect(listening.trim()).toBe('');
  });
});

describe('fanout batch', () => {
  const suite = useTestStack();
  // A test that scripts the simulator's latencies leaves the next one its defaults.
  afterEach(() => suite.servers.simulator.configure({}));

  it('refuses a malformed task file with the line named and exit code 2', async () => {
    const tasks = file('batch-bad.jsonl', '{"id":"a","prompt":"x"}\n{"id":"b","prompt":""}\n');
    const { code, stderr } = await runBatchStart(tasks, path.join(directory, 'never.jsonl'), suite.connectionArgs);
    expect(code).toBe(2);
    expect(stderr).toContain('batch-bad.jsonl line 2: prompt: must not be empty');
  });

  it('refuses a sink that cannot be written, naming why, and starts nothing', async () => {
    const tasks = file('batch-ok.jsonl', '{"id":"a","prompt":"x"}\n');
    const cases: [string, string][] = [
      [path.join(directory, 'no', 'such', 'dir', 'out.jsonl'), 'does not exist'],
      [directory, 'is a directory; --out needs a file name'],
      [tasks, 'is the task file itself'],
    ];
    for (const [out, message] of cases) {
      const { code, stdout, stderr } = await runBatchStart(tasks, out, suite.connectionArgs);
      expect([code, stdout]).toEqual([2, '']);
      expect(stderr.trim().split('\n')).toHaveLength(1);
      expect(stderr).toContain(message);
    }
    const empty = await runBatchStart(tasks, path.join(directory, 'x.jsonl'), ['--id', '', ...suite.connectionArgs]);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('the batch id: must not be empty');
  });

  it('stops watching at the first Ctrl-C (SIGINT), leaving the batch to run', async () => {
    const tasks = file('batch-ctrl-c.jsonl', '{"id":"a","prompt":"x"}\n');
    // A task queue no worker polls: the batch waits, and so does its watch.
    const watching = startCli([
      'batch',
      'start',
      tasks,
      '--out',
      path.join(directory, 'ctrl-c.jsonl'),
      '--id',
      'cli-ctrl-c',
      '--watch',
      ...suite.connectionArgs,
      '--task-queue',
      'no-worker-polls-this',
    ]);
    try {
      await waitFor('the watch to start', () => watching.errors().includes('cli-ctrl-c'), { timeoutMs: 30_000 });
      watching.signal('SIGINT');
      // One Ctrl-C ends it (the Temporal runtime's own SIGINT handler swallowed the first one).
      let timer: NodeJS.Timeout | undefined;
      const ended = await Promise.race([
        watching.done,
        new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), 20_000))),
      ]);
      clearTimeout(timer);
      expect(ended).toBeDefined();
    } finally {
      watching.signal('SIGKILL');
      await suite.servers.server.client.workflow
        .getHandle('cli-ctrl-c')
        .terminate('test over')
        .catch(() => undefined);
    }
  });

  it('starts, watches, reports, cancels and resumes a batch', async () => {
    // 1.5 s calls, and a last one that holds the batch open until the cancel has reached it (a batch already writing its
    // sink finishes instead); the resume's calls are quick.
    const ids = Array.from({ length: 30 }, (_, index) => `cli-${index}`);
    suite.servers.simulator.configure({
      latencyByTask: Object.fromEntries(ids.map((id, index) => [id, index === ids.length - 1 ? 600_000 : 1500])),
    });
    const tasks = file('batch.jsonl', ids.map((id) => JSON.stringify({ id, prompt: 'x' })).join('\n'));
    const out = path.join(directory, 'batch-out.jsonl');
    const started = await runBatchStart(tasks, out, [
      '--id',
      'cli-batch',
      '--concurrency',
      '5',
      '--json',
      ...suite.connectionArgs,
    ]);
    expect(started.code).toBe(0);
    expect(JSON.parse(started.stdout)).toEqual({ batchId: 'cli-batch', attached: false });

    const status = await runCli(['batch', 'status', 'cli-batch', '--json', ...suite.connectionArgs]);
    expect(JSON.parse(status.stdout)).toMatchObject({ batchId: 'cli-batch', total: 30 });
    // Cancelled once an item has answered, so the resume has one to keep (the CLI alone is no slower than a 1.5 s call).
    await waitFor(
      'an item of cli-batch to answer',
      async () => (await suite.stack.client.getBatch('cli-batch').progress()).succeeded > 0,
    );

    const cancelled = await runCli(['batch', 'cancel', 'cli-batch', ...suite.connectionArgs]);
    expect(cancelled).toMatchObject({
      code: 0,
      stdout: 'batch cli-batch cancelled; its answered results are in its sink\n',
    });
    const afterCancel = await runCli(['batch', 'status', 'cli-batch', '--watch', ...suite.connectionArgs]);
    expect({ code: afterCancel.code, stdout: afterCancel.stdout, stderr: afterCancel.stderr }).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('cancelled') as unknown,
    });
    suite.servers.simulator.configure({ latency: { minMs: 50, maxMs: 50 } });

    const resumed = await runCli(['batch', 'resume', 'cli-batch', '--watch', ...suite.connectionArgs]);
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toMatch(/batch cli-batch finished\n\s+ok \d+, failed 0, not run 0, already ok \d+ of \d+/);
    const lines = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string });
    expect(new Set(lines.map((line) => line.id)).size).toBe(30);
    expect(lines).toHaveLength(30);
  });

  it('resumes a batch that another Temporal client started, from the input it started with', async () => {
    // As any client of the public contract would start it: workflow type `batch`, its input, no memo.
    const tasks = file(
      'foreign-batch.jsonl',
      ['x [sim latency=10]', 'x [sim fault=404]', 'x [sim latency=10]']
        .map((prompt, index) => JSON.stringify({ id: `foreign-${index}`, prompt }))
        .join('\n'),
    );
    const out = path.join(directory, 'foreign-out.jsonl');
    const { client } = suite.stack.client;
    const started = await client.workflow.start('batch', {
      taskQueue: suite.stack.taskQueue,
      workflowId: 'foreign-batch',
      args: [{ batchId: 'foreign-batch', source: tasks, sink: out, options: { retry: { maximumAttempts: 1 } } }],
    });
    await started.result();
    expect((await started.describe()).memo ?? {}).not.toHaveProperty('source');
    const sent = () =>
      suite.servers.simulator.log().filter((request) => request.workflowId.startsWith('foreign-batch'));
    const before = sent().length;

    const resumed = await runCli(['batch', 'resume', 'foreign-batch', '--watch', ...suite.connectionArgs]);
    expect(resumed.stderr).not.toContain('fanout:');
    expect(resumed.code).toBe(1);
    expect(resumed.stdout).toMatch(/batch foreign-batch finished\n\s+ok 0, failed 1, not run 0, already ok 2 of 1/);
    // Only the failed item was sent again, with the options the batch started with (one attempt).
    expect(
      sent()
        .slice(before)
        .map((request) => request.taskId),
    ).toEqual(['foreign-1']);
  });
});
