import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileStorage } from '../src/store/file-storage';
import { StorageError } from '../src/store/object-storage';
import { rejectionOf } from './support/rejection';

const directory = mkdtempSync(path.join(os.tmpdir(), 'fanout-file-storage-'));
const file = path.join(directory, 'tasks.jsonl');
writeFileSync(file, '{"id":"a"}\n{"id":"b"}\n');
const storage = new FileStorage();

describe("reading a byte range of a local file (a batch item's line)", () => {
  it('returns the bytes asked for, and fewer at the end of the file', async () => {
    expect((await storage.readRange(file, 11, 11)).toString()).toBe('{"id":"b"}\n');
    expect((await storage.readRange(file, 18, 100)).toString()).toBe('b"}\n');
    expect((await storage.readRange(file, 100, 10)).length).toBe(0);
  });

  it('maps a missing file to NotFound and a directory to Invalid, naming the path', async () => {
    const missing = await rejectionOf(storage.readRange(path.join(directory, 'gone.jsonl'), 0, 10), StorageError);
    expect(missing.code).toBe('NotFound');
    expect(missing.message).toContain('gone.jsonl');
    expect((await rejectionOf(storage.readRange(directory, 0, 10), StorageError)).code).toBe('Invalid');
  });

  it('reads thousands of ranges at once without leaking descriptors', async () => {
    const lines = await Promise.all(
      Array.from({ length: 5000 }, (_, index) => storage.readRange(file, (index % 2) * 11, 11)),
    );
    expect(lines.every((line, index) => line.toString() === (index % 2 === 0 ? '{"id":"a"}\n' : '{"id":"b"}\n'))).toBe(
      true,
    );
  });
});
