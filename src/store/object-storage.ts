/**
 * The one interface every piece of blob I/O goes through: claim-check payloads, batch sources, sinks and spools.
 * Locations are local paths or `s3://` URIs (see contract/location.ts); one implementation per kind.
 */
export interface ObjectStorage {
  /** The object's size in bytes, or undefined when there is none. */
  size(uri: string): Promise<number | undefined>;
  read(uri: string): Promise<Buffer>;
  /** `length` bytes from `start` (fewer at the end of the object). */
  readRange(uri: string, start: number, length: number): Promise<Buffer>;
  /** The object's bytes from `start` on, streamed: objects far larger than memory are fine. */
  readStream(uri: string, start?: number): AsyncIterable<Buffer>;
  /**
   * Writes the whole object atomically: a reader sees the old object or the new one, never a part. `sync: false` (local
   * files) skips the flush to the disk: the object survives the process being killed, not the machine losing power.
   */
  write(uri: string, data: Buffer | string, options?: { sync?: boolean }): Promise<void>;
  /**
   * Opens `uri` for appending records, where the store can (local files): one open for many small records, none ever
   * rewritten, at a fraction of a whole-object write's cost. `undefined` where objects are written whole (S3): write one
   * object per record there. A crash may cut the last record short; `Appender` says how readers tell.
   */
  openAppender(uri: string): Promise<Appender | undefined>;
  /** Writes a stream as one object, atomically, without holding it in memory. Returns the bytes written. */
  writeStream(uri: string, chunks: AsyncIterable<Buffer | string>): Promise<number>;
  /** Names (not URIs) directly or indirectly under `prefix` + '/', sorted. */
  list(prefix: string): Promise<string[]>;
  remove(uri: string): Promise<void>;
  /** Removes everything under `prefix` + '/'. */
  removeTree(prefix: string): Promise<void>;
  /** Throws StorageError when an object could not be created at `uri` (missing directory or bucket, no permission). */
  checkWritable(uri: string): Promise<void>;
  /** True when `uri` names a directory (local) or a prefix with objects under it (S3). */
  isDirectory(uri: string): Promise<boolean>;
}

export type StorageErrorCode = 'NotFound' | 'AccessDenied' | 'Invalid' | 'Unavailable';

/** A storage failure with a stable code; the message names the location. */
export class StorageError extends Error {
  constructor(
    readonly code: StorageErrorCode,
    readonly uri: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${uri}: ${message}`, options);
    this.name = 'StorageError';
  }
}

/**
 * Appends records to one object, each in one write, unflushed: a record survives the process being killed, not the
 * machine losing power. A record may be cut short by a kill mid-write; the caller frames records so a reader can tell
 * (the batch journal begins and ends each with a newline and skips lines it cannot parse). After a failed append the
 * appender refuses more (the caller writes the record some other way). Appends from several processes interleave whole
 * records on one machine's disk; a disk shared between machines (NFS) gives no such promise: use S3 there.
 */
export interface Appender {
  append(record: string): Promise<void>;
  close(): Promise<void>;
}
