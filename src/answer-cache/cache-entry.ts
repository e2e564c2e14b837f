import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json';

/** The format an entry is written in; an entry of another is a miss. */
const FORMAT = 'temporal-fanout/answer-cache@1';

/** One stored answer: its key, when it was stored, and a digest of the rest, checked on every read. */
interface StoredEntry {
  format: string;
  key: string;
  storedAtMs: number;
  answer: unknown;
  sha256: string;
}

function digestOf(entry: Omit<StoredEntry, 'sha256'>): string {
  return createHash('sha256').update(canonicalJson(entry)).digest('hex');
}

/** An entry's bytes: the answer with its key, time and digest. */
export function encodeEntry(key: string, answer: unknown, storedAtMs: number): string {
  const entry = { format: FORMAT, key, storedAtMs, answer };
  return JSON.stringify({ ...entry, sha256: digestOf(entry) });
}

/** What a read found: the answer and when it was stored, or why the bytes are not an answer to trust. */
export type DecodedEntry = { answer: unknown; storedAtMs: number } | { corrupt: string };

/**
 * Reads an entry back and checks it: JSON, the format, the key it was stored under, and the digest of what it holds.
 * Anything else (a flipped byte, a cut-short write, another key's entry) is `corrupt`, never an answer.
 */
export function decodeEntry(key: string, data: Buffer): DecodedEntry {
  let parsed: Partial<StoredEntry>;
  try {
    parsed = JSON.parse(data.toString('utf8')) as Partial<StoredEntry>;
  } catch {
    return { corrupt: 'is not JSON' };
  }
  if (parsed === null || typeof parsed !== 'object') return { corrupt: 'is not an entry' };
  if (parsed.format !== FORMAT) return { corrupt: `has format ${String(parsed.format)}, not ${FORMAT}` };
  if (parsed.key !== key) return { corrupt: 'holds the entry of another request' };
  if (typeof parsed.storedAtMs !== 'number') return { corrupt: 'has no time' };
  const { sha256, ...rest } = parsed as StoredEntry;
  if (sha256 !== digestOf(rest)) return { corrupt: 'does not match its digest' };
  return { answer: parsed.answer, storedAtMs: parsed.storedAtMs };
}
