import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BatchResultLine } from '../src/contract/batch';
import { FanoutClient } from '../src/client/fanout-client';
import { startS3Server, type S3Server } from '../src/local/s3-server';
import { FileStorage, PayloadStore, Storage, StorageError, type ObjectStorage } from '../src/store';
import { runCli, spawnWorker, type WorkerProcess } from './support/processes';
import { startTestServers, uniqueName, type TestServers } from './support/test-stack';
import { waitFor } from './support/wait-for';
import { faultCost, requestsOfRun } from './support/request-ledger';

let s3: S3Server;
let servers: TestServers;
let storage: Storage;
const scratch = mkdtempSync(path.join(tmpdir(), 'fanout-s3-test-'));

beforeAll(async () => {
  [s3, servers] = await Promise.all([
    startS3Server(),
    startTestServers({ simulator: { latency: { minMs: 100, maxMs: 400 } } }),
  ]);
  storage = new Storage(s3.env());
});

afterAll(async () => {
  await servers?.stop();
  await s3?.stop();
});

const bucketUri = (key: string) => `s3://${s3.bucket}/${key}`;

async function linesOfSink(uri: string): Promise<BatchResultLine[]> {
  const text = (await storage.read(uri)).toString('utf8');
  if (text !== '' && !text.endsWith('\n')) throw new Error('the sink ends in a partial line');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as BatchResultLine);
}

describe.each([
  ['a local directory', () => new FileStorage() as ObjectStorage, () => path.join(scratch, uniqueName('files'))],
  ['S3 (SeaweedFS)', () => storage as ObjectStorage, () => bucketUri(uniqueName('objects'))],
])('object storage on %s', (_, make, base) => {
  it('writes, reads, reads ranges and lists objects, and reports absent ones', async () => {
    const store = make();
    const root = base();
    await store.write(`${root}/a/one.txt`, 'hello world');
    await store.write(`${root}/b.txt`, Buffer.from('second'));
    expect((await store.read(`${root}/a/one.txt`)).toString()).toBe('hello world');
    expect((await store.readRange(`${root}/a/one.txt`, 6, 5)).toString()).toBe('world');
    expect(await store.size(`${root}/b.txt`)).toBe(6);
    expect(await store.size(`${root}/missing.txt`)).toBeUndefined();
    expect(await store.list(root)).toEqual(['a/one.txt', 'b.txt']);
    expect(await store.isDirectory(`${root}/a`)).toBe(true);
    expect(await store.isDirectory(`${root}/b.txt`)).toBe(false);
    await expect(store.read(`${root}/missing.txt`)).rejects.toMatchObject({ code: 'NotFound' });
    await store.removeTree(root);
    expect(await store.list(root)).toEqual([]);
  });

  it('streams a 12 MB object in and out without holding it whole', async () => {
    const store = make();
    const uri = `${base()}/big.bin`;
    const chunk = Buffer.alloc(1024 * 1024, 7);
    async function* chunks() {
      for (let index = 0; index < 12; index += 1) yield chunk;
    }
    expect(await store.writeStream(uri, chunks())).toBe(12 * 1024 * 1024);
    let total = 0;
    for await (const part of store.readStream(uri, 1024)) total += part.length;
    expect(total).toBe(12 * 1024 * 1024 - 1024);
  });

  it('keeps payloads by reference and refuses one that no longer matches its digest', async () => {
    const store = make();
    const payloads = new PayloadStore(store, base());
    const ref = await payloads.put('runs/r1/outputs/a', 'an answer');
    expect(await payloads.get(ref)).toBe('an answer');
    await store.write(ref.uri, 'tampered!');
    await expect(payloads.get(ref)).rejects.toThrow(/do not match the reference/);
  });
});

describe('S3 specifics', () => {
  it('says when a bucket does not exist or the credentials are wrong', async () => {
    await expect(storage.checkWritable('s3://no-such-bucket-here/out.jsonl')).rejects.toMatchObject({
      code: 'NotFound',
    });
    const wrong = new Storage({ ...s3.env(), AWS_SECRET_ACCESS_KEY: 'not-the-secret' });
    const error = await wrong.write(bucketUri('x.txt'), 'x').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(StorageError);
    expect((error as StorageError).code).toBe('AccessDenied');
  });
});

describe('a batch on two machines that share no disk', () => {
  const workers: WorkerProcess[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.kill()));
  });

  /** A worker with its own private directory, cwd and home, reaching the batch's files only through S3. */
  async function machine(name: string, taskQueue: string): Promise<WorkerProcess> {
    const home = path.join(scratch, name);
    mkdirSync(home, { recursive: true });
    const worker = await spawnWorker({
      address: servers.server.address,
      taskQueue,
      cwd: home,
      env: {
        ...s3.env(),
        HOME: home,
        TMPDIR: home,
        XDG_DATA_HOME: path.join(home, 'data'),
        FANOUT_STORE: bucketUri('store'),
        OPENAI_BASE_URL: servers.simulator.baseUrl,
        OPENAI_API_KEY: 'test-key',
        FANOUT_HEARTBEAT_THROTTLE_MS: '500',
      },
    });
    workers.push(worker);
    return worker;
  }

  it('writes every id exactly once to an s3:// sink although one worker is SIGKILLed mid-way', async () => {
    const taskQueue = uniqueName('tq');
    const [first] = await Promise.all([machine('machine-a', taskQueue), machine('machine-b', taskQueue)]);
    const source = bucketUri(`${uniqueName('batch')}/tasks.jsonl`);
    const sink = source.replace('tasks.jsonl', 'results.jsonl');
    await storage.write(
      source,
      Array.from({ length: 300 }, (_, index) => JSON.stringify({ id: `s3-${index}`, prompt: `item ${index}` })).join(
        '\n',
      ),
    );

    const client = await FanoutClient.connect({
      client: servers.server.client,
      taskQueue,
      store: new PayloadStore(storage, bucketUri('store')),
    });
    const handle = await client.startBatch({ source, sink, options: { concurrency: 20, heartbeatTimeoutMs: 2000 } });
    await waitFor('a third of the batch to finish', async () => (await handle.progress()).done >= 100, {
      timeoutMs: 60_000,
    });
    await first.kill();
    const killedAt = Date.now();
    const summary = await handle.result();
    // Judged from the simulator's log: no call answered before the kill was sent again, no more re-sent than were open.
    const cost = faultCost(requestsOfRun(servers.simulator.log(), handle.batchId), killedAt);
    expect(cost.answeredThenResent).toEqual([]);
    expect(cost.duplicated).toBeLessThanOrEqual(cost.openAt + 1);
    expect(cost.openNow).toBe(0);

    expect(summary).toMatchObject({ total: 300, succeeded: 300, failed: 0 });
    const lines = await linesOfSink(sink);
    expect(lines).toHaveLength(300);
    expect(new Set(lines.map((line) => line.id)).size).toBe(300);
    expect(lines.every((line) => line.status === 'ok' && line.output?.includes('[simulated]'))).toBe(true);
    // Of the spool beside the sink only the mark that the sink is whole is left once the batch has assembled it.
    expect(await storage.list(`${sink}.parts`)).toEqual([expect.stringMatching(/\/FINISHED\.json$/)]);
  });

  it('refuses a batch whose s3:// source is missing or whose bucket does not exist, before starting', async () => {
    const cli = (args: string[]) =>
      runCli(['batch', 'start', ...args, '--address', servers.server.address, '--task-queue', 'nobody'], s3.env());
    const missing = await cli([bucketUri('nothing/here.jsonl'), '--out', bucketUri('nothing/out.jsonl')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('here.jsonl: cannot be read (it does not exist)');

    const source = bucketUri(`${uniqueName('ok')}/tasks.jsonl`);
    await storage.write(source, '{"id":"a","prompt":"x"}\n');
    const noBucket = await cli([source, '--out', 's3://no-such-bucket-here/out.jsonl']);
    expect(noBucket.code).toBe(2);
    expect(noBucket.stderr.trim().split('\n')).toHaveLength(1);
    expect(noBucket.stderr).toContain('the bucket "no-such-bucket-here" does not exist');
  });

  it('ends FAILED with the storage error, visible in `fanout batch status`, when the store stays down', async () => {
    const taskQueue = uniqueName('tq');
    await machine('machine-c', taskQueue);
    const source = path.join(scratch, 'down-tasks.jsonl');
    writeFileSync(
      source,
      Array.from({ length: 200 }, (_, index) =>
        JSON.stringify({ id: `d-${index}`, prompt: `x [sim latency=300]` }),
      ).join('\n'),
    );
    const sink = bucketUri(`${uniqueName('down')}/results.jsonl`);
    const client = await FanoutClient.connect({
      client: servers.server.client,
      taskQueue,
      store: new PayloadStore(storage, bucketUri('store')),
    });
    const handle = await client.startBatch({ source, sink, options: { concurrency: 10, storageAttempts: 2 } });
    await waitFor('some results', async () => (await handle.progress()).done >= 10, { timeoutMs: 60_000 });
    await s3.stop();
    await expect(handle.result()).rejects.toThrow();

    const { code, stdout } = await runCli(
      ['batch', 'status', handle.batchId, '--address', servers.server.address],
      s3.env(),
    );
    expect(code).toBe(1);
    expect(stdout).toContain(`batch ${handle.batchId}: failed (`);
    expect(stdout).toMatch(/StorageUnavailable|ECONNREFUSED|connect/);
  });
});
