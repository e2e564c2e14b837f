import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  ListBucketsCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { ensureTool } from './ensure-tool';
import { freePort } from './free-port';

export interface S3ServerOptions {
  /** Where SeaweedFS keeps volumes and metadata; default a directory inside the server's private temp dir. */
  dataDir?: string;
  /** Bucket created once the server answers; default `fanout-payloads`. */
  bucket?: string;
}

/** A running SeaweedFS (master, volume server, filer and S3 gateway in one `weed mini` process). */
export interface S3Server {
  /** `http://127.0.0.1:PORT`; use it with path-style addressing (bucket names do not resolve as host names here). */
  readonly endpoint: string;
  readonly region: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly bucket: string;
  /** What a worker process needs to reach this server: AWS credentials and region, FANOUT_S3_ENDPOINT, path style. */
  env(): Record<string, string>;
  /** Stops the process group (SIGTERM, then SIGKILL) and removes the private temp dir. */
  stop(): Promise<void>;
}

const REGION = 'us-east-1';
const START_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 5_000;

/**
 * Path of a `weed` binary: $SEAWEEDFS_WEED, a `weed` on PATH, or the per-user cache, building it there once
 * (several minutes) when none exists. Throws with the user's options when none can be had.
 */
export function findWeed(): string {
  return ensureTool(
    'ensure-seaweedfs.sh',
    'no SeaweedFS weed binary is available (see the messages above); set SEAWEEDFS_WEED to one',
  );
}

/**
 * Starts a real S3-compatible server on free 127.0.0.1 ports with static credentials, creates `bucket`, and
 * returns once an object can be written (the first write waits for the filer's lock ring, seconds after S3 answers).
 *
 * @example
 *   const s3 = await startS3Server();
 *   const client = new S3Client({ endpoint: s3.endpoint, region: s3.region, forcePathStyle: true,
 *     credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } });
 *   ...
 *   await s3.stop();
 */
export async function startS3Server(options: S3ServerOptions = {}): Promise<S3Server> {
  const weed = findWeed();
  const bucket = options.bucket ?? 'fanout-payloads';
  const accessKeyId = `FANOUT${randomBytes(7).toString('hex').toUpperCase()}`;
  const secretAccessKey = randomBytes(30).toString('base64url');
  // Ports are picked before weed binds them, so another process can take one in between; weed then exits at once
  // (it refuses to move a port given on its command line) and one more try with fresh ports settles it.
  for (let attempt = 1; ; attempt++) {
    const home = mkdtempSync(path.join(tmpdir(), 'fanout-s3-'));
    const weedProcess = await launch(weed, home, options.dataDir ?? path.join(home, 'data'), {
      accessKeyId,
      secretAccessKey,
    });
    const endpoint = `http://127.0.0.1:${weedProcess.s3Port}`;
    const server: S3Server = {
      endpoint,
      region: REGION,
      accessKeyId,
      secretAccessKey,
      bucket,
      env: () => ({
        AWS_ACCESS_KEY_ID: accessKeyId,
        AWS_SECRET_ACCESS_KEY: secretAccessKey,
        AWS_REGION: REGION,
        FANOUT_S3_ENDPOINT: endpoint,
        FANOUT_S3_FORCE_PATH_STYLE: 'true',
      }),
      stop: async () => {
        await weedProcess.stop();
        rmSync(home, { recursive: true, force: true });
      },
    };
    try {
      await waitUntilWritable(server, weedProcess);
      return server;
    } catch (error) {
      await server.stop();
      if (!(error instanceof ExitedEarly) || attempt >= 2) throw error;
    }
  }
}

/** weed ended before serving: usually a port taken between `freePort()` and weed's bind. */
class ExitedEarly extends Error {}

interface WeedProcess {
  readonly child: ChildProcess;
  readonly s3Port: number;
  readonly logFile: string;
  stop(): Promise<void>;
}

async function launch(
  weed: string,
  home: string,
  dataDir: string,
  credentials: { accessKeyId: string; secretAccessKey: string },
): Promise<WeedProcess> {
  mkdirSync(dataDir, { recursive: true });
  const configFile = path.join(home, 's3.json');
  const identity = {
    name: 'fanout',
    credentials: [{ accessKey: credentials.accessKeyId, secretKey: credentials.secretAccessKey }],
    actions: ['Admin', 'Read', 'List', 'Tagging', 'Write'],
  };
  writeFileSync(configFile, JSON.stringify({ identities: [identity] }));
  const logFile = path.join(home, 'weed.log');

  // Every gRPC port is given: left alone, weed derives it as HTTP port + 10000, which may be taken or past 65535.
  const ports = await Promise.all(Array.from({ length: 10 }, () => freePort()));
  const [master, masterGrpc, volume, volumeGrpc, filer, filerGrpc, s3, s3Grpc, admin, adminGrpc] = ports;
  // `weed mini` is master, volume server, filer, S3 gateway and a maintenance admin in one process. It beats
  // `weed server -s3` here: the same memory, but it starts its parts as soon as the previous one answers and skips
  // the filer's wait for peers a single-master cluster cannot have, so the first write lands seconds earlier.
  const args = [
    '-logtostderr',
    'mini',
    '-ip=127.0.0.1',
    '-ip.bind=127.0.0.1',
    `-dir=${dataDir}`,
    '-master.peers=none',
    // No phoning home (this machine has no network anyway).
    '-master.telemetry=false',
    `-master.port=${master}`,
    `-master.port.grpc=${masterGrpc}`,
    // Small volumes, created on demand: a test writes megabytes, not gigabytes.
    '-master.volumeSizeLimitMB=64',
    '-volume.max=0',
    `-volume.port=${volume}`,
    `-volume.port.grpc=${volumeGrpc}`,
    `-filer.port=${filer}`,
    `-filer.port.grpc=${filerGrpc}`,
    `-filer.localSocket=${path.join(home, 'filer.sock')}`,
    `-s3.port=${s3}`,
    `-s3.port.grpc=${s3Grpc}`,
    `-s3.localSocket=${path.join(home, 's3.sock')}`,
    `-s3.config=${configFile}`,
    // Like AWS: a PUT to a missing bucket is NoSuchBucket, not a bucket made on the fly that would hide a bug.
    '-s3.autoCreateBucket=false',
    // Fixed default ports would collide between two servers; the payload store needs none of these.
    '-s3.port.iceberg=0',
    '-s3.port.lance=0',
    '-webdav=false',
    '-admin.ui=false',
    `-admin.port=${admin}`,
    `-admin.port.grpc=${adminGrpc}`,
    '-admin.port.legacy=0',
  ];
  const log = openSync(logFile, 'a');
  // Its own process group, so stop() reaches anything weed starts; cwd is the private dir so weed finds no
  // master.toml/filer.toml/security.toml lying in the caller's directory.
  const child = spawn(weed, args, { cwd: home, detached: true, stdio: ['ignore', log, log] });
  closeSync(log);
  const killOnExit = (): void => killGroup(child, 'SIGKILL');
  process.once('exit', killOnExit);
  return {
    child,
    s3Port: s3,
    logFile,
    stop: async () => {
      process.removeListener('exit', killOnExit);
      await stopGroup(child);
      // weed also serves each gRPC port on a unix socket under /tmp, named by port, and leaves them behind.
      for (const [name, port] of [
        ['master', masterGrpc],
        ['volume', volumeGrpc],
        ['filer', filerGrpc],
        ['s3', s3Grpc],
        ['admin', adminGrpc],
      ] as const) {
        rmSync(path.join('/tmp', `seaweedfs-${name}-grpc-${port}.sock`), { force: true });
      }
    },
  };
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || exited(child)) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is already gone.
  }
}

/** SIGTERM lets weed flush and close its volumes and stores; SIGKILL if it has not gone within STOP_GRACE_MS. */
async function stopGroup(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || exited(child)) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  killGroup(child, 'SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), STOP_GRACE_MS)));
  if ((await Promise.race([gone, late])) === 'late') {
    killGroup(child, 'SIGKILL');
    await gone;
  }
  clearTimeout(timer);
}

function logTail(logFile: string, lines = 40): string {
  try {
    return readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * Ready means the S3 gateway authenticates a request, the bucket exists and an object can be written and deleted.
 * Each probe has a short timeout and no SDK retries, so the deadline is ours.
 */
async function waitUntilWritable(server: S3Server, weed: WeedProcess): Promise<void> {
  // As the S3 store does (s3-storage.ts): the SDK's warning that its future releases need Node 22 is noise here.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const client = new S3Client({
    endpoint: server.endpoint,
    region: server.region,
    forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
    maxAttempts: 1,
    requestHandler: { connectionTimeout: 1_000, requestTimeout: 10_000 },
  });
  const probe = { Bucket: server.bucket, Key: '.fanout-s3-server-ready' };
  const deadline = Date.now() + START_TIMEOUT_MS;
  let last: unknown;
  try {
    for (;;) {
      if (exited(weed.child)) {
        throw new ExitedEarly(
          `SeaweedFS exited (code ${weed.child.exitCode}, signal ${weed.child.signalCode}) before S3 answered; its log ends:\n${logTail(weed.logFile)}`,
        );
      }
      try {
        const { Buckets = [] } = await client.send(new ListBucketsCommand({}));
        if (!Buckets.some((existing) => existing.Name === server.bucket)) {
          await client.send(new CreateBucketCommand({ Bucket: server.bucket }));
        }
        await client.send(new PutObjectCommand({ ...probe, Body: 'ready' }));
        await client.send(new DeleteObjectCommand(probe));
        return;
      } catch (error) {
        last = error;
      }
      if (Date.now() > deadline) {
        throw new Error(
          `SeaweedFS's S3 gateway at ${server.endpoint} was not writable within ${START_TIMEOUT_MS} ms (last error: ${String(last)}); its log ends:\n${logTail(weed.logFile)}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } finally {
    client.destroy();
  }
}
