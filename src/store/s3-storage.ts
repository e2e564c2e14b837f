import { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { Environment } from '../config/environment';
import { parseLocation } from '../contract/location';
import { StorageError, type ObjectStorage } from './object-storage';

/** A connection to the S3 endpoint that is not up within this is abandoned (and the request retried), ms. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Default of FANOUT_S3_REQUEST_TIMEOUT_MS. */
const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

/**
 * How long one S3 request may wait for its response, and a socket may sit idle mid-transfer (a body that stops
 * flowing), before it fails and is retried: without it the SDK waits forever, and one hung GET held a batch item as
 * long. Env FANOUT_S3_REQUEST_TIMEOUT_MS; default 60000 (an 8 MB upload part needs the time on a slow link).
 */
export function s3RequestTimeoutMs(environment: Environment = process.env): number {
  const raw = environment.FANOUT_S3_REQUEST_TIMEOUT_MS?.trim();
  if (raw === undefined || raw === '') return DEFAULT_REQUEST_TIMEOUT_MS;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0)
    throw new TypeError(`FANOUT_S3_REQUEST_TIMEOUT_MS must be a positive whole number of ms, got "${raw}"`);
  return value;
}

/**
 * The S3 client, configured the AWS way (credentials, region and `AWS_ENDPOINT_URL_S3` from the usual AWS variables and
 * files) plus FANOUT_S3_ENDPOINT / FANOUT_S3_FORCE_PATH_STYLE for S3-compatible servers (MinIO, R2, SeaweedFS, GCS).
 */
export function s3ClientFromEnvironment(environment: Environment = process.env): S3Client {
  // The SDK warns on every process under Node 20 that *future* releases will need Node 22; the version this package
  // pins supports Node 20, so a CLI user would only see noise on every command. An explicit setting is respected.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const endpoint = environment.FANOUT_S3_ENDPOINT?.trim() || undefined;
  const pathStyle = environment.FANOUT_S3_FORCE_PATH_STYLE?.trim();
  const accessKeyId = environment.AWS_ACCESS_KEY_ID?.trim();
  const secretAccessKey = environment.AWS_SECRET_ACCESS_KEY?.trim();
  const requestTimeoutMs = s3RequestTimeoutMs(environment);
  return new S3Client({
    // Keys given in this environment win; otherwise the SDK's own chain (profiles, SSO, instance roles) finds them.
    ...(accessKeyId && secretAccessKey
      ? {
          credentials: {
            accessKeyId,
            secretAccessKey,
            ...(environment.AWS_SESSION_TOKEN ? { sessionToken: environment.AWS_SESSION_TOKEN } : {}),
          },
        }
      : {}),
    region: environment.AWS_REGION?.trim() || environment.AWS_DEFAULT_REGION?.trim() || 'us-east-1',
    ...(endpoint ? { endpoint } : {}),
    // Path-style addressing is what most S3-compatible servers expect; AWS itself wants virtual-hosted style.
    forcePathStyle: pathStyle === undefined || pathStyle === '' ? endpoint !== undefined : pathStyle === 'true',
    // Only checksums the operation requires: several S3-compatible servers reject the newer default trailers.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: 3,
    // Without these the SDK's requests have no deadline at all (connection, response, or a stalled body).
    requestHandler: {
      connectionTimeout: CONNECT_TIMEOUT_MS,
      requestTimeout: requestTimeoutMs,
      throwOnRequestTimeout: true,
      socketTimeout: requestTimeoutMs,
    },
  });
}

function bucketKey(uri: string): { Bucket: string; Key: string } {
  const location = parseLocation(uri);
  if ('error' in location || location.kind !== 's3')
    throw new StorageError('Invalid', uri, 'error' in location ? location.error : 'not an s3:// URI');
  return { Bucket: location.bucket, Key: location.key };
}

function statusOf(error: unknown): number | undefined {
  return error instanceof S3ServiceException
    ? error.$metadata?.httpStatusCode
    : (error as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
}

function wrap(uri: string, error: unknown): never {
  if (error instanceof StorageError) throw error;
  const status = statusOf(error);
  const name = (error as Error)?.name ?? 'Error';
  if (status === 404 || name === 'NoSuchKey' || name === 'NotFound' || name === 'NoSuchBucket') {
    throw new StorageError('NotFound', uri, name === 'NoSuchBucket' ? 'no such bucket' : 'no such object', {
      cause: error,
    });
  }
  if (name === 'CredentialsProviderError') {
    throw new StorageError(
      'AccessDenied',
      uri,
      'no AWS credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)',
      { cause: error },
    );
  }
  if (status === 403 || name === 'AccessDenied' || name === 'InvalidAccessKeyId' || name === 'SignatureDoesNotMatch') {
    throw new StorageError('AccessDenied', uri, `access denied (${name})`, { cause: error });
  }
  throw new StorageError('Unavailable', uri, `${name}: ${(error as Error)?.message ?? String(error)}`, {
    cause: error,
  });
}

function prefixKey(prefix: string): { Bucket: string; Prefix: string } {
  const { Bucket, Key } = bucketKey(prefix);
  return { Bucket, Prefix: Key === '' ? '' : `${Key.replace(/\/+$/, '')}/` };
}

/** S3-compatible object storage: the store for workers on many machines. */
export class S3Storage implements ObjectStorage {
  constructor(readonly client: S3Client) {}

  async size(uri: string): Promise<number | undefined> {
    try {
      const head = await this.client.send(new HeadObjectCommand(bucketKey(uri)));
      return head.ContentLength ?? 0;
    } catch (error) {
      if (statusOf(error) === 404 || (error as Error).name === 'NotFound') return undefined;
      return wrap(uri, error);
    }
  }

  async read(uri: string): Promise<Buffer> {
    try {
      const object = await this.client.send(new GetObjectCommand(bucketKey(uri)));
      return Buffer.from(await (object.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
    } catch (error) {
      return wrap(uri, error);
    }
  }

  async readRange(uri: string, start: number, length: number): Promise<Buffer> {
    if (length <= 0) return Buffer.alloc(0);
    try {
      const object = await this.client.send(
        new GetObjectCommand({ ...bucketKey(uri), Range: `bytes=${start}-${start + length - 1}` }),
      );
      return Buffer.from(await (object.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
    } catch (error) {
      if (statusOf(error) === 416) return Buffer.alloc(0);
      return wrap(uri, error);
    }
  }

  async *readStream(uri: string, start = 0): AsyncIterable<Buffer> {
    let body: Readable;
    try {
      const object = await this.client.send(
        new GetObjectCommand({ ...bucketKey(uri), ...(start > 0 ? { Range: `bytes=${start}-` } : {}) }),
      );
      body = object.Body as Readable;
    } catch (error) {
      if (statusOf(error) === 416) return;
      wrap(uri, error);
    }
    try {
      for await (const chunk of body) yield chunk as Buffer;
    } catch (error) {
      wrap(uri, error);
    }
  }

  async write(uri: string, data: Buffer | string): Promise<void> {
    try {
      await this.client.send(
        new PutObjectCommand({ ...bucketKey(uri), Body: typeof data === 'string' ? Buffer.from(data, 'utf8') : data }),
      );
    } catch (error) {
      wrap(uri, error);
    }
  }

  /** S3 objects are written whole: no appends. */
  async openAppender(): Promise<undefined> {
    return undefined;
  }

  async writeStream(uri: string, chunks: AsyncIterable<Buffer | string>): Promise<number> {
    let bytes = 0;
    const counted = async function* () {
      for await (const chunk of chunks) {
        const buffer = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
        bytes += buffer.length;
        yield buffer;
      }
    };
    try {
      // A multipart upload becomes visible only when it completes: readers never see a part of the object.
      await new Upload({
        client: this.client,
        params: { ...bucketKey(uri), Body: Readable.from(counted()) },
        queueSize: 2,
        partSize: 8 * 1024 * 1024,
      }).done();
      return bytes;
    } catch (error) {
      return wrap(uri, error);
    }
  }

  async list(prefix: string): Promise<string[]> {
    const { Bucket, Prefix } = prefixKey(prefix);
    const names: string[] = [];
    let token: string | undefined;
    try {
      do {
        const page = await this.client.send(new ListObjectsV2Command({ Bucket, Prefix, ContinuationToken: token }));
        for (const object of page.Contents ?? []) if (object.Key) names.push(object.Key.slice(Prefix.length));
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    } catch (error) {
      return wrap(prefix, error);
    }
    return names.sort();
  }

  async remove(uri: string): Promise<void> {
    try {
      await this.client.send(new DeleteObjectCommand(bucketKey(uri)));
    } catch (error) {
      if (statusOf(error) !== 404) wrap(uri, error);
    }
  }

  async removeTree(prefix: string): Promise<void> {
    const { Bucket, Prefix } = prefixKey(prefix);
    const names = await this.list(prefix);
    try {
      for (let index = 0; index < names.length; index += 1000) {
        const keys = names.slice(index, index + 1000).map((name) => ({ Key: `${Prefix}${name}` }));
        await this.client.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: keys, Quiet: true } }));
      }
    } catch (error) {
      wrap(prefix, error);
    }
  }

  async checkWritable(uri: string): Promise<void> {
    const { Bucket, Key } = bucketKey(uri);
    if (Key === '' || Key.endsWith('/'))
      throw new StorageError('Invalid', uri, 'names a bucket or a prefix, not an object');
    try {
      await this.client.send(new HeadBucketCommand({ Bucket }));
    } catch (error) {
      if (statusOf(error) === 404)
        throw new StorageError('NotFound', uri, `the bucket "${Bucket}" does not exist`, { cause: error });
      wrap(uri, error);
    }
    // Only a write proves write permission; the probe sits beside the object and is removed at once.
    const probe = `s3://${Bucket}/${Key}.fanout-probe`;
    await this.write(probe, '');
    await this.remove(probe);
  }

  async isDirectory(uri: string): Promise<boolean> {
    const { Bucket, Key } = bucketKey(uri);
    if (Key === '' || Key.endsWith('/')) return true;
    try {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket, Prefix: `${Key}/`, MaxKeys: 1 }));
      return (page.KeyCount ?? 0) > 0;
    } catch {
      return false;
    }
  }
}
