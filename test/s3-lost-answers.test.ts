import path from 'node:path';
import { readFileSync } from 'node:fs';
import { FanoutClient } from '../src/client/fanout-client';
import { PayloadStore } from '../src/store';
import { modelCalls, toolCalls } from './support/agents';
import { batchDirectory, writeTasks } from './support/batch-files';
import { requestsOfRun } from './support/request-ledger';
import { type ProxyRule, useS3BehindProxy } from './support/s3-proxy';
import { useWorkerProcesses } from './support/suite-stack';
import { uniqueName } from './support/test-stack';

// S3 behind a proxy that (a) passes a write on, lets it land, and closes the connection instead of answering, more
// times in a row than the S3 client's own tries, and (b) answers every call late. Neither may lose an answer or send a
// paid call again.

const suite = useWorkerProcesses({ simulator: { latency: { minMs: 20, maxMs: 20 } } });
const directory = batchDirectory();

const behind = useS3BehindProxy();

/**
 * Drops the answers of the first `times` writes (PUT or POST) of each object under `prefix` whose path holds one of
 * `kinds`: per object, so that one write fails more often in a row than the S3 client tries it.
 */
function dropFirstWrites(prefix: string, kinds: string[], times: number): (method: string, path: string) => ProxyRule {
  const writes = new Map<string, number>();
  return (method, requestPath) => {
    if ((method !== 'PUT' && method !== 'POST') || !requestPath.includes(prefix)) return {};
    if (!kinds.some((kind) => requestPath.includes(kind))) return {};
    const object = requestPath.split('?')[0];
    writes.set(object, (writes.get(object) ?? 0) + 1);
    return { dropAnswer: (writes.get(object) ?? 0) <= times };
  };
}

/** What the proxy dropped under `prefix`, per kind. */
function droppedOf(prefix: string, kinds: string[]): Record<string, number> {
  const dropped = behind.proxy.requests.filter((request) => request.dropped && request.path.includes(prefix));
  return Object.fromEntries(
    kinds.map((kind) => [kind, dropped.filter((request) => request.path.includes(kind)).length]),
  );
}

/** A worker process on a fresh queue whose store and S3 calls go through the proxy; its client. */
async function workerOnProxy(env: Record<string, string> = {}) {
  const taskQueue = uniqueName('s3-lost');
  await suite.spawnWorker(taskQueue, { ...behind.env(), ...env });
  const store = new PayloadStore(behind.storage, env.FANOUT_STORE ?? `s3://${behind.bucket}/store`);
  return FanoutClient.connect({ client: suite.servers.server.client, taskQueue, store });
}

/** Runs a batch of `count` items with its task file and sink on S3; returns its id and the sink's ids and oks. */
async function s3Batch(client: FanoutClient, key: string, count: number) {
  const prefix = `s3://${behind.bucket}/${key}`;
  await behind.storage.write(`${prefix}/tasks.jsonl`, readFileSync(writeTasks(directory, count, () => 'x', key)));
  const handle = await client.startBatch({
    source: `${prefix}/tasks.jsonl`,
    sink: `${prefix}/results.jsonl`,
    options: { concurrency: 3, itemsPerActivity: 2 },
  });
  const summary = await handle.result();
  const lines = (await behind.storage.read(`${prefix}/results.jsonl`))
    .toString('utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as { id: string; status: string });
  return {
    batchId: handle.batchId,
    summary,
    ids: lines.map((line) => line.id),
    ok: lines.filter((l) => l.status === 'ok'),
  };
}

describe('a batch on S3 whose writes land and lose their answers', () => {
  it('completes with every item once, each call sent once, through four lost answers of each write', async () => {
    const client = await workerOnProxy();
    const key = uniqueName('lost-batch');
    // Each lane journal record, lane segment, the sink (not the client's probe beside it) and the finished mark loses
    // the answers of its first 4 writes: the S3 client tries 3 times, so the store's own retry, or the activity's, has
    // to take over.
    const kinds = ['/lanes/', '/seg/', 'results.jsonl?', 'FINISHED.json'];
    behind.proxy.setRule(dropFirstWrites(key, kinds, 4));
    const { batchId, summary, ids, ok } = await s3Batch(client, key, 6);

    expect(summary).toMatchObject({ total: 6, succeeded: 6, failed: 0 });
    expect([ids.length, new Set(ids).size, ok.length]).toEqual([6, 6, 6]);
    const requests = requestsOfRun(suite.servers.simulator.log(), batchId);
    expect(requests.map((request) => request.taskId).sort()).toEqual(ids.sort());
    // Every kind of write did lose answers: the test went through what it is about.
    for (const [kind, count] of Object.entries(droppedOf(key, kinds))) expect([kind, count > 0]).toEqual([kind, true]);
  });
});

describe('a batch on a slow S3', () => {
  it('completes with every item once and each call sent once when every S3 call takes 150 ms more', async () => {
    const client = await workerOnProxy();
    const key = uniqueName('slow-batch');
    behind.proxy.setRule((_, requestPath) => (requestPath.includes(key) ? { delayMs: 150 } : {}));
    const { batchId, summary, ids, ok } = await s3Batch(client, key, 6);

    expect(summary).toMatchObject({ total: 6, succeeded: 6, failed: 0 });
    expect([ids.length, new Set(ids).size, ok.length]).toEqual([6, 6, 6]);
    const requests = requestsOfRun(suite.servers.simulator.log(), batchId);
    expect(requests.map((request) => request.taskId).sort()).toEqual(ids.sort());
  });
});

describe('an agent run whose payload store on S3 is slow and loses answers', () => {
  it('finishes with each model step and each tool call sent once', async () => {
    const root = uniqueName('lost-store');
    const client = await workerOnProxy({
      FANOUT_STORE: `s3://${behind.bucket}/${root}`,
      FANOUT_TOOLS: path.join(__dirname, 'support', 'agent-tools.js'),
      FANOUT_TEST_SIM_URL: suite.servers.simulator.baseUrl,
    });
    // The first 4 writes of each object land and lose their answer, and every call takes 150 ms more.
    const drops = dropFirstWrites(root, ['/'], 4);
    behind.proxy.setRule((method, requestPath) =>
      requestPath.includes(root) ? { delayMs: 150, ...drops(method, requestPath) } : {},
    );
    const task = {
      id: 'stored',
      prompt: 'Dig [[tool:search {"q":"one"}]] [[tool:fetch_page {"url":"two"}]]',
      tools: ['search', 'fetch_page'],
    };
    const handle = await client.startParallel([task]);
    const { results } = await handle.result();

    expect(results[0].status).toBe('ok');
    expect(results[0].output).toContain('search found: one | fetch_page found: two');
    expect(modelCalls(suite.servers.simulator, task.id).map((call) => call.attempt)).toEqual([1, 1, 1]);
    const tools = toolCalls(suite.servers.simulator).filter((call) => call.workflowId.startsWith(handle.workflowId));
    expect(tools.map((call) => call.taskId)).toEqual(['tool:search:call_1_1', 'tool:fetch_page:call_2_1']);
    expect(
      behind.proxy.requests.filter((request) => request.dropped && request.path.includes(root)).length,
    ).toBeGreaterThan(0);
  });
});
