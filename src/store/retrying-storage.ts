import { StorageError, type ObjectStorage } from './object-storage';

/** Tries of one call, about 1.5 s in all, before the error goes to the activity (and Temporal's retry policy). */
const TRIES = 4;

/**
 * Tries for a store that keeps answers already paid for (agent steps, fan-out calls): about 25 s in all, since an
 * activity that fails here is retried by Temporal, which sends the model call again.
 */
export const PAID_ANSWER_TRIES = 8;

function transient(error: unknown): boolean {
  return error instanceof StorageError && error.code === 'Unavailable';
}

async function tryAgain<T>(call: () => Promise<T>, tries: number): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await call();
    } catch (error) {
      if (!transient(error) || attempt >= tries) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
    }
  }
}

/**
 * A store whose calls are tried again, one by one, when they fail for a moment (an S3 503, a dropped connection): a batch
 * activity makes many store calls, and one blip must not throw away the work of the others (or, in a lane, an answer
 * already paid for). Each call is idempotent by the store's contract (whole-object writes, named objects). A stream is
 * retried only while it is being opened.
 */
export function retrying(inner: ObjectStorage, tries = TRIES): ObjectStorage {
  const again = <T>(call: () => Promise<T>): Promise<T> => tryAgain(call, tries);
  return {
    size: (uri) => again(() => inner.size(uri)),
    read: (uri) => again(() => inner.read(uri)),
    readRange: (uri, start, length) => again(() => inner.readRange(uri, start, length)),
    readStream: (uri, start) => {
      for (let attempt = 1; ; attempt += 1) {
        try {
          return inner.readStream(uri, start);
        } catch (error) {
          if (!transient(error) || attempt >= tries) throw error;
        }
      }
    },
    write: (uri, data, options) => again(() => inner.write(uri, data, options)),
    writeStream: (uri, chunks) => inner.writeStream(uri, chunks),
    // Opening is tried again; an append is not (a failed one may have written part of its record): the caller falls back.
    openAppender: (uri) => again(() => inner.openAppender(uri)),
    list: (prefix) => again(() => inner.list(prefix)),
    remove: (uri) => again(() => inner.remove(uri)),
    removeTree: (prefix) => again(() => inner.removeTree(prefix)),
    checkWritable: (uri) => inner.checkWritable(uri),
    isDirectory: (uri) => again(() => inner.isDirectory(uri)),
  };
}
