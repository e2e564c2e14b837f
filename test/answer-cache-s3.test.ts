import { startS3Server, type S3Server } from '../src/local/s3-server';
import { AnswerCache, entryLocation } from '../src/answer-cache/answer-cache';
import { resolveCacheSettings } from '../src/client/cache-settings';
import { InvalidInputError } from '../src/contract/validation';
import { Storage } from '../src/store';
import { uniqueName } from './support/test-stack';

let s3: S3Server;
let storage: Storage;

beforeAll(async () => {
  s3 = await startS3Server();
  storage = new Storage(s3.env());
});

afterAll(async () => {
  await s3?.stop();
});

const call = { taskId: 't', label: 'agent "t"' };

it('keeps its entries in S3 as on local files: a hit, a byte flipped taken for a miss, a replay miss', async () => {
  const location = `s3://${s3.bucket}/${uniqueName('answer-cache')}`;
  const warnings: string[] = [];
  const cache = new AnswerCache({ storage, storeRoot: `s3://${s3.bucket}/store`, warn: (text) => warnings.push(text) });
  let sent = 0;
  const send = async () => {
    sent += 1;
    return `answer ${sent}`;
  };
  const key = 'a'.repeat(64);
  expect(await cache.through({ mode: 'read-write', location }, key, call, send)).toEqual({
    value: 'answer 1',
    cached: false,
  });
  expect(await cache.through({ mode: 'read-only', location }, key, call, send)).toEqual({
    value: 'answer 1',
    cached: true,
  });
  const uri = entryLocation(location, key);
  const bytes = await storage.read(uri);
  bytes[bytes.indexOf('answer 1') + 'answer '.length] = '9'.charCodeAt(0);
  await storage.write(uri, bytes);
  expect(await cache.through({ mode: 'read-write', location }, key, call, send)).toEqual({
    value: 'answer 2',
    cached: false,
  });
  expect(warnings.join('\n')).toContain('does not match its digest');
  const miss = await cache
    .through({ mode: 'replay', location }, 'b'.repeat(64), call, send)
    .catch((error: unknown) => error);
  expect(miss).toMatchObject({ type: 'CacheMiss', nonRetryable: true });
  expect(sent).toBe(2);
});

it('checks that read-write can write an S3 location before anything starts', async () => {
  const store = { storage, root: `s3://${s3.bucket}/store` };
  const location = `s3://${s3.bucket}/${uniqueName('writable')}`;
  expect(await resolveCacheSettings({ mode: 'read-write', location }, store, {})).toEqual({
    mode: 'read-write',
    location,
  });
  expect(await storage.list(location)).toEqual([]);
  const refused = await resolveCacheSettings(
    { mode: 'read-write', location: 's3://no-such-bucket-for-the-cache/x' },
    store,
    {},
  ).catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(InvalidInputError);
  expect((refused as Error).message).toContain('cannot be written');
});
