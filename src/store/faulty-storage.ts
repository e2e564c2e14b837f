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

  private maybeFail(uri: string, what: string): void {
    if (this.next() < this.rate) throw new StorageError('Unavailable', uri, `injected fault (${what})`);
  }

  async size(uri: string) {
    this.maybeFail(uri, 'size');
    return this.inner.size(uri);
  }
  async read(uri: string) {
    this.maybeFail(uri, 'read');
    return this.inner.read(uri);
  }
  async readRange(uri: string, start: number, length: number) {
    this.maybeFail(uri, 'readRange');
    return this.inner.readRange(uri, start, length);
  }
  readStream(uri: string, start?: number) {
    this.maybeFail(uri, 'readStream');
    return this.inner.readStream(uri, start);
  }
  async write(uri: string, data: Buffer | string, options?: { sync?: boolean }) {
    this.maybeFail(uri, 'write');
    return this.inner.write(uri, data, options);
  }
  async openAppender(uri: string): Promise<Appender | undefined> {
    this.maybeFail(uri, 'openAppender');
    const inner = await this.inner.openAppender(uri);
    if (!inner) return undefined;
    return {
      // A fault before the write: the record never reaches the object, as when a disk refuses a write.
      append: async (record: string) => {
        this.maybeFail(uri, 'append');
        return inner.append(record);
      },
      close: () => inner.close(),
    };
  }
  async writeStream(uri: string, chunks: AsyncIterable<Buffer | string>) {
    this.maybeFail(uri, 'writeStream');
    return this.inner.writeStream(uri, chunks);
  }
  async list(prefix: string) {
    this.maybeFail(prefix, 'list');
    return this.inner.list(prefix);
  }
  async remove(uri: string) {
    this.maybeFail(uri, 'remove');
    return this.inner.remove(uri);
  }
  async removeTree(prefix: string) {
    this.maybeFail(prefix, 'removeTree');
    return this.inner.removeTree(prefix);
  }
  checkWritable(uri: string) {
    return this.inner.checkWritable(uri);
  }
  isDirectory(uri: string) {
    return this.inner.isDirectory(uri);
  }
}
