import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { S3Storage, s3ClientFromEnvironment, s3RequestTimeoutMs } from '../src/store/s3-storage';
import { StorageError } from '../src/store/object-storage';

/** An "S3 endpoint" that takes requests and never finishes them: it answers nothing, or only the start of a body. */
let server: Server;
let endpoint: string;
const sockets = new Set<Socket>();
const held: ServerResponse[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    held.push(response);
    if (request.url?.includes('stalled-body')) {
      // Headers and a few bytes of a 1 MB object, then nothing more.
      response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(1024 * 1024) });
      response.write('partial');
    }
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function storage(): S3Storage {
  return new S3Storage(
    s3ClientFromEnvironment({
      FANOUT_S3_ENDPOINT: endpoint,
      FANOUT_S3_REQUEST_TIMEOUT_MS: '300',
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
      AWS_REGION: 'us-east-1',
    }),
  );
}

/** The rejection of `promise`, or a marker if it is still pending after `ms`: a storage call must never hang. */
async function settledWithin<T>(promise: Promise<T>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const pending = new Promise((resolve) => (timer = setTimeout(() => resolve('still pending'), ms)));
  try {
    return await Promise.race([
      promise.then(
        () => 'resolved',
        (error: unknown) => error,
      ),
      pending,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

it('fails a read whose server never answers, as a retryable Unavailable, instead of waiting forever', async () => {
  const outcome = await settledWithin(storage().read('s3://bucket/no-answer.jsonl'), 15_000);
  expect(outcome).toBeInstanceOf(StorageError);
  expect((outcome as StorageError).code).toBe('Unavailable');
});

it('fails a read whose body stops flowing half-way', async () => {
  const outcome = await settledWithin(storage().read('s3://bucket/stalled-body.jsonl'), 15_000);
  expect(outcome).toBeInstanceOf(StorageError);
  expect((outcome as StorageError).code).toBe('Unavailable');
});

it('fails a write whose server never answers', async () => {
  const outcome = await settledWithin(storage().write('s3://bucket/no-answer-put.jsonl', 'line\n'), 15_000);
  expect(outcome).toBeInstanceOf(StorageError);
});

it('reads FANOUT_S3_REQUEST_TIMEOUT_MS, 60 s by default, and rejects a bad value naming the variable', () => {
  expect(s3RequestTimeoutMs({})).toBe(60_000);
  expect(s3RequestTimeoutMs({ FANOUT_S3_REQUEST_TIMEOUT_MS: '2500' })).toBe(2500);
  expect(() => s3RequestTimeoutMs({ FANOUT_S3_REQUEST_TIMEOUT_MS: 'soon' })).toThrow(/FANOUT_S3_REQUEST_TIMEOUT_MS/);
});
