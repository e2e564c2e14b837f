import { createHash, randomBytes } from 'node:crypto';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { startS3Server, type S3Server } from '../src/local/s3-server';

let server: S3Server;
let s3: S3Client;

function clientFor(target: S3Server, secretAccessKey = target.secretAccessKey): S3Client {
  return new S3Client({
    endpoint: target.endpoint,
    region: target.region,
    forcePathStyle: true,
    credentials: { accessKeyId: target.accessKeyId, secretAccessKey },
    maxAttempts: 1,
  });
}

async function read(key: string, range?: string): Promise<{ body: Buffer; contentRange?: string }> {
  const response = await s3.send(new GetObjectCommand({ Bucket: server.bucket, Key: key, Range: range }));
  return { body: Buffer.from(await response.Body!.transformToByteArray()), contentRange: response.ContentRange };
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

beforeAll(async () => {
  server = await startS3Server({ bucket: 'payload-test' });
  s3 = clientFor(server);
});

afterAll(async () => {
  s3?.destroy();
  await server?.stop();
});

describe('startS3Server', () => {
  it('serves S3 on 127.0.0.1 and hands out the environment a worker needs to reach it', () => {
    expect(server.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(server.bucket).toBe('payload-test');
    expect(server.env()).toEqual({
      AWS_ACCESS_KEY_ID: server.accessKeyId,
      AWS_SECRET_ACCESS_KEY: server.secretAccessKey,
      AWS_REGION: server.region,
      FANOUT_S3_ENDPOINT: server.endpoint,
      FANOUT_S3_FORCE_PATH_STYLE: 'true',
    });
  });

  it('stores, reads, range-reads, lists and deletes an object', async () => {
    const key = 'runs/run-1/task-a.json';
    const text = '{"output":"hello, payload store"}';
    await s3.send(
      new PutObjectCommand({ Bucket: server.bucket, Key: key, Body: text, ContentType: 'application/json' }),
    );

    expect((await read(key)).body.toString()).toBe(text);
    const range = await read(key, 'bytes=11-15');
    expect(range.body.toString()).toBe('hello');
    expect(range.contentRange).toBe(`bytes 11-15/${text.length}`);

    const listed = await s3.send(new ListObjectsV2Command({ Bucket: server.bucket, Prefix: 'runs/run-1/' }));
    expect(listed.Contents?.map((object) => [object.Key, object.Size])).toEqual([[key, text.length]]);

    await s3.send(new DeleteObjectCommand({ Bucket: server.bucket, Key: key }));
    await expect(read(key)).rejects.toMatchObject({ name: 'NoSuchKey' });
    const after = await s3.send(new ListObjectsV2Command({ Bucket: server.bucket, Prefix: 'runs/run-1/' }));
    expect(after.Contents ?? []).toEqual([]);
  });

  it('answers NoSuchBucket for a bucket nobody created, as AWS does, instead of creating it on the fly', async () => {
    await expect(s3.send(new PutObjectCommand({ Bucket: 'never-created', Key: 'k', Body: 'v' }))).rejects.toMatchObject(
      { name: 'NoSuchBucket' },
    );
  });

  it('takes a 12 MB object in parts through lib-storage and returns it byte for byte', async () => {
    const key = 'runs/run-2/large.bin';
    const data = randomBytes(12 * 1024 * 1024);
    const upload = new Upload({
      client: s3,
      params: { Bucket: server.bucket, Key: key, Body: data },
      partSize: 5 * 1024 * 1024,
      queueSize: 2,
    });
    const parts: number[] = [];
    upload.on('httpUploadProgress', (progress) => {
      if (progress.part !== undefined) parts.push(progress.part);
    });
    await upload.done();

    expect(new Set(parts)).toEqual(new Set([1, 2, 3]));
    const head = await s3.send(new HeadObjectCommand({ Bucket: server.bucket, Key: key }));
    expect(head.ContentLength).toBe(data.length);
    // A multipart ETag is "<md5 of the part md5s>-<part count>": proof the server assembled three parts.
    expect(head.ETag).toMatch(/-3"$/);
    const back = await read(key);
    expect(back.body.length).toBe(data.length);
    expect(sha256(back.body)).toBe(sha256(data));
    const tail = await read(key, `bytes=${data.length - 10}-`);
    expect(tail.body.equals(data.subarray(data.length - 10))).toBe(true);
  });

  it('refuses a request signed with the wrong secret key, and an unsigned one', async () => {
    await s3.send(new PutObjectCommand({ Bucket: server.bucket, Key: 'secret.txt', Body: 'not for strangers' }));
    const impostor = clientFor(server, `${server.secretAccessKey}x`);
    try {
      await expect(
        impostor.send(new GetObjectCommand({ Bucket: server.bucket, Key: 'secret.txt' })),
      ).rejects.toMatchObject({
        name: 'SignatureDoesNotMatch',
        $metadata: { httpStatusCode: 403 },
      });
      await expect(impostor.send(new ListObjectsV2Command({ Bucket: server.bucket }))).rejects.toMatchObject({
        $metadata: { httpStatusCode: 403 },
      });
    } finally {
      impostor.destroy();
    }
    const anonymous = await fetch(`${server.endpoint}/${server.bucket}/secret.txt`);
    expect(anonymous.status).toBe(403);
    expect(await anonymous.text()).not.toContain('not for strangers');
  });

  it('runs beside another server, and stop() closes its port', async () => {
    const second = await startS3Server();
    expect(second.endpoint).not.toBe(server.endpoint);
    expect(second.bucket).toBe('fanout-payloads');
    const client = clientFor(second);
    try {
      await client.send(new PutObjectCommand({ Bucket: second.bucket, Key: 'k', Body: 'v' }));
      expect((await client.send(new GetObjectCommand({ Bucket: second.bucket, Key: 'k' }))).ContentLength).toBe(1);
    } finally {
      client.destroy();
      await second.stop();
    }
    await expect(fetch(second.endpoint)).rejects.toThrow();
  });
});
