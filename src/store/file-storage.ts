import {
  close,
  createReadStream,
  open as openCallback,
  read as readCallback,
  writeFile as writeFileCallback,
} from 'node:fs';
import { promisify } from 'node:util';
import { access, constants, mkdir, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { StorageError, type Appender, type ObjectStorage } from './object-storage';

function localPath(uri: string): string {
  return uri.startsWith('file://') ? decodeURIComponent(uri.slice('file://'.length)) : uri;
}

function wrap(uri: string, error: unknown): never {
  const code = (error as NodeJS.ErrnoException).code;
  if (error instanceof StorageError) throw error;
  if (code === 'ENOENT') throw new StorageError('NotFound', uri, 'no such file or directory', { cause: error });
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS')
    throw new StorageError('AccessDenied', uri, `permission denied (${code})`, { cause: error });
  if (code === 'EISDIR' || code === 'ENOTDIR')
    throw new StorageError('Invalid', uri, code === 'EISDIR' ? 'is a directory' : 'a parent is not a directory', {
      cause: error,
    });
  throw new StorageError('Unavailable', uri, (error as Error).message ?? String(error), { cause: error });
}

function wrapped(uri: string, error: unknown): unknown {
  try {
    return wrap(uri, error);
  } catch (mapped) {
    return mapped;
  }
}

/**
 * Opens a file for writing (`w`) or appending (`a`), making `directory` (where the file goes) when it is missing: only
 * then, since most files go where others went before.
 */
async function openMakingDirectory(file: string, flags: 'w' | 'a', directory: string): Promise<FileHandle> {
  return open(file, flags).catch(async (error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
    await mkdir(directory, { recursive: true });
    return open(file, flags);
  });
}

/** Writes through a temporary sibling then renames: a crash leaves the old file or the new one, and the data is synced. */
async function writeAtomically(target: string, write: (handle: FileHandle) => Promise<number>): Promise<number> {
  const temporary = `${target}.${randomUUID().slice(0, 8)}.tmp`;
  const handle = await openMakingDirectory(temporary, 'w', path.dirname(target));
  let bytes: number;
  try {
    bytes = await write(handle);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temporary, { force: true });
    throw error;
  }
  await handle.close();
  await rename(temporary, target);
  return bytes;
}

const writeFileUnsynced = promisify(writeFileCallback);

/**
 * The cheap atomic write, for the batch journal (one per answered call): a temporary sibling renamed into place, with
 * no flush, no FileHandle and no mkdir unless the directory turns out to be missing. Four system calls on the thread
 * pool instead of seven (the worker's CPU per call, bench/worker-cpu.ts).
 */
async function writeUnsynced(target: string, bytes: Buffer): Promise<void> {
  const temporary = `${target}.${randomUUID().slice(0, 8)}.tmp`;
  try {
    await writeFileUnsynced(temporary, bytes);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    await mkdir(path.dirname(target), { recursive: true });
    await writeFileUnsynced(temporary, bytes);
  }
  try {
    await rename(temporary, target);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

/** Local files: the embedded default, for workers on one machine (several machines: S3; see `openAppender`). */
export class FileStorage implements ObjectStorage {
  async size(uri: string): Promise<number | undefined> {
    try {
      const info = await stat(localPath(uri));
      if (info.isDirectory()) throw new StorageError('Invalid', uri, 'is a directory');
      return info.size;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      return wrap(uri, error);
    }
  }

  async read(uri: string): Promise<Buffer> {
    try {
      const handle = await open(localPath(uri), 'r');
      try {
        return await handle.readFile();
      } finally {
        await handle.close();
      }
    } catch (error) {
      return wrap(uri, error);
    }
  }

  /**
   * A batch reads every item's line this way. Through plain descriptors, not a FileHandle: the handle objects and their
   * promises cost a fifth more CPU per read (measured: 64-78 against 82-123 µs for open, read, close).
   */
  readRange(uri: string, start: number, length: number): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      openCallback(localPath(uri), 'r', (openError, fd) => {
        if (openError) return reject(wrapped(uri, openError));
        const buffer = Buffer.alloc(length);
        readCallback(fd, buffer, 0, length, start, (readError, bytesRead) => {
          close(fd, (closeError) => {
            const error = readError ?? closeError;
            if (error) reject(wrapped(uri, error));
            else resolve(buffer.subarray(0, bytesRead));
          });
        });
      });
    });
  }

  async *readStream(uri: string, start = 0): AsyncIterable<Buffer> {
    try {
      for await (const chunk of createReadStream(localPath(uri), { start, highWaterMark: 1 << 20 }))
        yield chunk as Buffer;
    } catch (error) {
      wrap(uri, error);
    }
  }

  async write(uri: string, data: Buffer | string, options?: { sync?: boolean }): Promise<void> {
    try {
      const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
      if (options?.sync === false) return await writeUnsynced(localPath(uri), bytes);
      await writeAtomically(localPath(uri), async (handle) => {
        await handle.write(bytes, 0, bytes.length, 0);
        return bytes.length;
      });
    } catch (error) {
      wrap(uri, error);
    }
  }

  async openAppender(uri: string): Promise<Appender> {
    const target = localPath(uri);
    try {
      const handle = await openMakingDirectory(target, 'a', path.dirname(target));
      let broken: unknown;
      return {
        append: async (record: string) => {
          if (broken !== undefined) wrap(uri, broken);
          const bytes = Buffer.from(record, 'utf8');
          try {
            const { bytesWritten } = await handle.write(bytes);
            if (bytesWritten !== bytes.length)
              throw new StorageError('Unavailable', uri, `wrote ${bytesWritten} of ${bytes.length} bytes`);
          } catch (error) {
            broken = error;
            wrap(uri, error);
          }
        },
        close: () => handle.close().catch(() => undefined),
      };
    } catch (error) {
      return wrap(uri, error);
    }
  }

  async writeStream(uri: string, chunks: AsyncIterable<Buffer | string>): Promise<number> {
    try {
      return await writeAtomically(localPath(uri), async (handle) => {
        let position = 0;
        for await (const chunk of chunks) {
          const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
          await handle.write(bytes, 0, bytes.length, position);
          position += bytes.length;
        }
        return position;
      });
    } catch (error) {
      return wrap(uri, error);
    }
  }

  async list(prefix: string): Promise<string[]> {
    const root = localPath(prefix);
    try {
      const entries = await readdir(root, { recursive: true, withFileTypes: true });
      return entries
        .filter((entry) => entry.isFile())
        .map((entry) => path.relative(root, path.join(entry.parentPath, entry.name)))
        .sort();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      return wrap(prefix, error);
    }
  }

  async remove(uri: string): Promise<void> {
    await rm(localPath(uri), { force: true }).catch((error: unknown) => wrap(uri, error));
  }

  async removeTree(prefix: string): Promise<void> {
    await rm(localPath(prefix), { recursive: true, force: true }).catch((error: unknown) => wrap(prefix, error));
  }

  async checkWritable(uri: string): Promise<void> {
    const directory = path.dirname(localPath(uri));
    try {
      const info = await stat(directory);
      if (!info.isDirectory()) throw new StorageError('Invalid', uri, `${directory} is not a directory`);
      await access(directory, constants.W_OK);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT')
        throw new StorageError('NotFound', uri, `the directory ${directory} does not exist`);
      if ((error as NodeJS.ErrnoException).code === 'EACCES')
        throw new StorageError('AccessDenied', uri, `the directory ${directory} is not writable`);
      wrap(uri, error);
    }
  }

  async isDirectory(uri: string): Promise<boolean> {
    try {
      return (await stat(localPath(uri))).isDirectory();
    } catch {
      return false;
    }
  }
}
