import { appendFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { describeError } from '../src/cli/errors';
import { batchDirectory, readSink, startTaskBatch, writeTasks } from './support/batch-files';
import { lanesStoppedAt } from './support/history';
import { runBatchStart } from './support/processes';
import { answeredIds, droppedAnswers, requestsOfRun } from './support/request-ledger';
import { useTestStack } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

const directory = batchDirectory();

const suite = useTestStack();

describe('a batch refuses what can never work, before it pays for a call', () => {
  it('started directly with a sink whose directory does not exist, ends FAILED within 30 s naming the sink, with no call made', async () => {
    const source = writeTasks(directory, 5, () => 'x', 'nowhere');
    const sink = path.join(directory, 'no-such-directory', 'out.jsonl');
    const batchId = uniqueName('unwritable');
    const startedAt = Date.now();
    const workflow = await suite.servers.server.client.workflow.start('batch', {
      taskQueue: suite.stack.taskQueue,
      workflowId: batchId,
      args: [{ batchId, source, sink }],
    });
    const failure = await workflow.result().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect(Date.now() - startedAt).toBeLessThan(30_000);
    expect(describeError(failure)).toContain(sink);
    expect(requestsOfRun(suite.servers.simulator.log(), batchId)).toEqual([]);
  });

  it('refuses, with exit code 2 and nothing started, a sink under a file and a sink the permission bits call writable but is not', async () => {
    const source = writeTasks(directory, 3, () => 'x', 'refused-sinks');
    const file = path.join(directory, 'afile');
    writeFileSync(file, 'not a directory');
    for (const out of [path.join(file, 'out.jsonl'), '/proc/out.jsonl']) {
      const id = uniqueName('refused');
      const cli = await runBatchStart(source, out, ['--id', id, ...suite.connectionArgs]);
      expect({ out, code: cli.code }).toEqual({ out, code: 2 });
      expect(cli.stderr).toContain(out);
      const started = await suite.servers.server.client.workflow
        .getHandle(id)
        .describe()
        .then(
          () => true,
          () => false,
        );
      expect(started).toBe(false);
    }
  });

  it('refuses agent tasks (tools, an output schema) in a provider batch, naming the line, before anything starts', async () => {
    const source = path.join(directory, 'agents.jsonl');
    writeFileSync(
      source,
      `${JSON.stringify({ id: 'a', prompt: 'x' })}\n${JSON.stringify({ id: 'b', prompt: 'x', tools: ['search'] })}\n`,
    );
    const batchId = uniqueName('agents-provider');
    const error = await suite.stack.client
      .startBatch({
        batchId,
        source,
        sink: path.join(directory, 'agents.out.jsonl'),
        options: { route: 'provider-batch' },
      })
      .catch((caught: unknown) => caught);
    expect(String(error)).toContain(
      'agents.jsonl line 2: an agent (a task with tools or an output schema) cannot go in a provider batch',
    );
    await expect(suite.stack.client.client.workflow.getHandle(batchId).describe()).rejects.toThrow(/not found/i);
  });

  it('fails with SourceChanged, keeping every answer, when lines are appended to the task file while it runs', async () => {
    const { handle, source, sink } = await startTaskBatch(suite.stack.client, 'appended', 60, 'x [sim latency=200]', {
      concurrency: 2,
    });
    await waitFor(
      'a few answers',
      () => answeredIds(requestsOfRun(suite.servers.simulator.log(), handle.batchId)).size >= 4,
      { timeoutMs: 30_000 },
    );
    // A duplicate of an id the batch already has: appended lines are never run, the batch says why it stops.
    appendFileSync(source, `${JSON.stringify({ id: 'appended-0', prompt: 'again' })}\n`);
    const failure = await handle.result().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect(describeError(failure)).toContain('changed while the batch ran');
    const requests = requestsOfRun(suite.servers.simulator.log(), handle.batchId);
    expect(requests.filter((request) => request.taskId === 'appended-0')).toHaveLength(1);
    const written = new Set(readSink(sink).map((line) => line.id));
    expect(droppedAnswers(requests, written, { stopAt: await lanesStoppedAt(handle.workflow) })).toEqual([]);
  });
});

describe("a provider's long error pages", () => {
  it('are cut to 1,000 characters in the sink: 600 failures with a 5 KB page each still end in one small sink', async () => {
    const { handle, sink } = await startTaskBatch(
      suite.stack.client,
      'pages',
      600,
      'x [sim fault=400 error-bytes=5000]',
      { concurrency: 20 },
    );
    expect(await handle.result()).toMatchObject({ total: 600, succeeded: 0, failed: 600 });
    const lines = readSink(sink);
    expect(lines).toHaveLength(600);
    expect(Math.max(...lines.map((line) => line.error?.message.length ?? 0))).toBeLessThanOrEqual(1100);
    expect(lines[0].error?.message).toContain('(5');
  });
});
