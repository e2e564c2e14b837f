import { StorageError, type Appender, type ObjectStorage } from './object-storage';

/**
 * A store that fails a share of its calls with StorageError('Unavailable'), as a flaky disk or S3 does: for fault
 * tests of the whole system (FANOUT_STORE_FAULT_RATE on a worker). Seeded, so a failing schedule can be replayed.
 */
export class FaultyStorage implements ObjectStorage {
  private state: number;

  constructor(
    private readonly inner: ObjectStorage,
    private readonly rate: number,
    seed = 1,
  ) {
    this.state = seed >>> 0 || 1;
  }

  /** xorshift32: deterministic for a seed. */
  private next(): number {
    let x = this.state;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.state = x >>> 0;
    return this.state / 0x1_0000_0000;
  }

  /** The inner store's answer to `call`, unless the call is picked to fail: it then throws before reaching the store. */
  private faulty<T>(uri: string, what: string, call: (inner: ObjectStorage) => T): T {
    if (this.next() < this.rate) throw new StorageError('Unavailable', uri, `injected fault (${what})`);
    return call(this.inner);
  }

  async size(uri: string) {
    return this.faulty(uri, 'size', (inner) => inner.size(uri));
  }
  async read(uri: string) {
    return this.faulty(uri, 'read', (inner) => inner.read(uri));
  }
  async readRange(uri: string, start: number, length: number) {
    return this.faulty(uri, 'readRange', (inner) => inner.readRange(uri, start, length));
  }
  readStream(uri: string, start?: number) {
    return this.faulty(uri, 'readStream', (inner) => inner.readStream(uri, start));
  }
  async write(uri: string, data: Buffer | string, options?: { sync?: boolean }) {
    return this.faulty(uri, 'write', (inner) => inner.write(uri, data, options));
  }
  async openAppender(uri: string): Promise<Appender | undefined> {
    const inner = await this.faulty(uri, 'openAppender', (store) => store.openAppender(uri));
    if (!inner) return undefined;
    return {
      // A fault before the write: the record never reaches the object, as when a disk refuses a write.
      append: async (record: string) => this.faulty(uri, 'append', () => inner.append(record)),
      close: () => inner.close(),
    };
  }
  async writeStream(uri: string, chunks: AsyncIterable<Buffer | string>) {
    return this.faulty(uri, 'writeStream', (inner) => inner.writeStream(uri, chunks));
  }
  async list(prefix: string) {
    return this.faulty(prefix, 'list', (inner) => inner.list(prefix));
  }
  async remove(uri: string) {
    return this.faulty(uri, 'remove', (inner) => inner.remove(uri));
  }
  async removeTree(prefix: string) {
    return this.faulty(prefix, 'removeTree', (inner) => inner.removeTree(prefix));
  }
  checkWritable(uri: string) {
    return this.inner.checkWritable(uri);
  }
  isDirectory(uri: string) {
    return this.inner.isDirectory(uri);
  }
}
