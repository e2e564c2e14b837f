import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { childOf, parseLocation } from '../contract/location';
import type { Environment } from '../config/environment';
import type { PayloadRef } from '../contract/payload-ref';
import { FileStorage } from './file-storage';
import { FaultyStorage } from './faulty-storage';
import { StorageError, type ObjectStorage } from './object-storage';
import type { S3Storage } from './s3-storage';

export { StorageError, type ObjectStorage } from './object-storage';
export { FileStorage } from './file-storage';

/**
 * Routes each location to local files or S3 by its scheme. The S3 client is made on first use, and the AWS SDK loaded
 * only then: a worker that never sees an `s3://` location does not carry it (about 22 MB of resident code).
 */
export class Storage implements ObjectStorage {
  private readonly files = new FileStorage();
  private s3: S3Storage | undefined;

  constructor(private readonly environment: Environment = process.env) {}

  private backend(uri: string): ObjectStorage {
    const location = parseLocation(uri);
    if ('error' in location) throw new StorageError('Invalid', uri, location.error);
    if (location.kind === 'file') return this.files;
    if (!this.s3) {
      const { S3Storage: S3, s3ClientFromEnvironment } = require('./s3-storage') as typeof import('./s3-storage');
      this.s3 = new S3(s3ClientFromEnvironment(this.environment));
    }
    return this.s3;
  }

  // Each call goes to the backend its location names.
  readonly size: ObjectStorage['size'] = (uri) => this.backend(uri).size(uri);
  readonly read: ObjectStorage['read'] = (uri) => this.backend(uri).read(uri);
  readonly readRange: ObjectStorage['readRange'] = (uri, start, length) =>
    this.backend(uri).readRange(uri, start, length);
  readonly readStream: ObjectStorage['readStream'] = (uri, start) => this.backend(uri).readStream(uri, start);
  readonly write: ObjectStorage['write'] = (uri, data, options) => this.backend(uri).write(uri, data, options);
  readonly writeStream: ObjectStorage['writeStream'] = (uri, chunks) => this.backend(uri).writeStream(uri, chunks);
  readonly openAppender: ObjectStorage['openAppender'] = (uri) => this.backend(uri).openAppender(uri);
  readonly list: ObjectStorage['list'] = (prefix) => this.backend(prefix).list(prefix);
  readonly remove: ObjectStorage['remove'] = (uri) => this.backend(uri).remove(uri);
  readonly removeTree: ObjectStorage['removeTree'] = (prefix) => this.backend(prefix).removeTree(prefix);
  readonly checkWritable: ObjectStorage['checkWritable'] = (uri) => this.backend(uri).checkWritable(uri);
  readonly isDirectory: ObjectStorage['isDirectory'] = (uri) => this.backend(uri).isDirectory(uri);
}

/** The default store directory when FANOUT_STORE is unset: per user, outside any clone. */
export function defaultStoreRoot(environment: Environment = process.env): string {
  const base = environment.XDG_DATA_HOME?.trim() || path.join(os.homedir(), '.local', 'share');
  return path.join(base, 'temporal-fanout', 'store');
}

/** FANOUT_STORE: a local directory or `s3://bucket/prefix`; default a per-user directory. */
export function storeRootFromEnvironment(environment: Environment = process.env): string {
  const configured = environment.FANOUT_STORE?.trim();
  if (!configured) return defaultStoreRoot(environment);
  const location = parseLocation(
    configured.startsWith('/') || configured.includes('://') ? configured : path.resolve(configured),
  );
  if ('error' in location) throw new Error(`FANOUT_STORE ${location.error}, got "${configured}"`);
  return location.kind === 'file' ? location.path : configured.replace(/\/+$/, '');
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/**
 * The claim-check store: large prompts, outputs and dependency context are written here and history carries a
 * `PayloadRef`. Keys are content-addressed within their run, so a retried write is the same object.
 */
export class PayloadStore {
  constructor(
    readonly storage: ObjectStorage,
    readonly root: string,
  ) {}

  /** Stores `text` under `<root>/<key>-<digest>` and returns its reference. */
  async put(key: string, text: string): Promise<PayloadRef> {
    const data = Buffer.from(text, 'utf8');
    const digest = sha256(data);
    const uri = childOf(this.root, `${key}-${digest.slice(0, 16)}`);
    await this.storage.write(uri, data);
    return { uri, bytes: data.length, sha256: digest };
  }

  /** Reads a referenced value and checks it is the value that was stored. */
  async get(ref: PayloadRef): Promise<string> {
    const data = await this.storage.read(ref.uri);
    if (data.length !== ref.bytes || sha256(data) !== ref.sha256) {
      throw new StorageError(
        'Invalid',
        ref.uri,
        `holds ${data.length} bytes that do not match the reference (${ref.bytes} bytes, sha256 ${ref.sha256.slice(0, 12)}…)`,
      );
    }
    return data.toString('utf8');
  }
}

let shared: { storage: ObjectStorage; store: PayloadStore } | undefined;

/** The process's storage and payload store, from the environment. */
export function storeFromEnvironment(): { storage: ObjectStorage; store: PayloadStore } {
  if (!shared) {
    // A share of failing calls, for fault tests of the whole system (test/fault-schedule.test.ts); never set in production.
    const faultRate = Number(process.env.FANOUT_STORE_FAULT_RATE ?? 0);
    const storage =
      faultRate > 0
        ? new FaultyStorage(new Storage(), faultRate, Number(process.env.FANOUT_STORE_FAULT_SEED ?? process.pid))
        : new Storage();
    shared = { storage, store: new PayloadStore(storage, storeRootFromEnvironment()) };
  }
  return shared;
}
