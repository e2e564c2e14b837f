import type { ObjectStorage } from '../store';

/** One line of an object with its byte offset and length (newline excluded). */
export interface SourceLine {
  /** The line's text; undefined when its bytes are not valid UTF-8. */
  text: string | undefined;
  offset: number;
  length: number;
  /** 1-based line number, counted from `firstLine`. */
  line: number;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** Decodes one line strictly: invalid UTF-8 is reported rather than silently replaced and sent to a model. */
export function decodeLine(raw: Buffer): string | undefined {
  try {
    // TextDecoder drops a leading byte-order mark; a CR before the newline is a Windows line ending.
    return utf8.decode(raw).replace(/\r$/, '');
  } catch {
    return undefined;
  }
}

/**
 * The lines of a stored object (local file or S3 object) from byte `start`, with the byte offset of each, streamed:
 * objects far larger than memory are fine. `firstLine` is the number of the line at `start`, for messages.
 */
export async function* linesOf(
  storage: ObjectStorage,
  uri: string,
  start = 0,
  firstLine = 1,
): AsyncGenerator<SourceLine> {
  let carry: Buffer = Buffer.alloc(0);
  let carryOffset = start;
  let line = firstLine;
  for await (const chunk of storage.readStream(uri, start)) {
    const buffer = carry.length === 0 ? chunk : Buffer.concat([carry, chunk]);
    let lineStart = 0;
    for (let index = buffer.indexOf(10); index !== -1; index = buffer.indexOf(10, lineStart)) {
      const raw = buffer.subarray(lineStart, index);
      yield { text: decodeLine(raw), offset: carryOffset + lineStart, length: raw.length, line };
      line += 1;
      lineStart = index + 1;
    }
    carryOffset += lineStart;
    carry = Buffer.from(buffer.subarray(lineStart));
  }
  if (carry.length > 0) yield { text: decodeLine(carry), offset: carryOffset, length: carry.length, line };
}
