import type * as Sha256 from '@noble/hashes/sha256';
import type * as HashUtils from '@noble/hashes/utils';

/**
 * Where a blob lives: an absolute local path (or a `file://` URL) or an `s3://bucket/key` URI. Pure string handling, so
 * workflows may use it to derive the names of the objects a batch writes beside its sink.
 */
export type Location = { kind: 'file'; path: string } | { kind: 's3'; bucket: string; key: string };

const S3_URI = /^s3:\/\/([^/]+)\/?(.*)$/;

/** Parses a location, or returns a message saying what is wrong with it. */
export function parseLocation(uri: string): Location | { error: string } {
  if (uri.startsWith('s3://')) {
    const match = S3_URI.exec(uri);
    if (!match || match[1] === '') return { error: 'an s3:// URI needs a bucket: s3://bucket/key' };
    return { kind: 's3', bucket: match[1], key: match[2] };
  }
  if (uri.startsWith('file://')) {
    const path = decodeURIComponent(uri.slice('file://'.length));
    if (!path.startsWith('/')) return { error: 'a file:// URL must hold an absolute path' };
    return { kind: 'file', path };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(uri))
    return { error: `unsupported scheme "${uri.split(':')[0]}" (use a local path or s3://bucket/key)` };
  if (!uri.startsWith('/')) return { error: 'must be an absolute path or an s3:// URI' };
  return { kind: 'file', path: uri };
}

/** True for `s3://` locations. */
export function isRemote(uri: string): boolean {
  return uri.startsWith('s3://');
}

/** `base` joined with a relative name, for either kind of location. */
export function childOf(base: string, name: string): string {
  return `${base.replace(/\/+$/, '')}/${name}`;
}

/**
 * SHA-256 of the text, in hex: what tells cut names apart. Pure JavaScript (workflow code names agents' places too),
 * and wide enough that no two ids of any batch share it (a 32-bit hash collided within a few tens of thousands).
 * Loaded on first use: workflows load their modules afresh for every run, and few names are long.
 */
function hashOf(text: string): string {
  const { sha256 } = require('@noble/hashes/sha256') as typeof Sha256;
  const { bytesToHex } = require('@noble/hashes/utils') as typeof HashUtils;
  return bytesToHex(sha256(text));
}

/** Longest name segmentName returns (file systems allow 255 bytes). */
const MAX_SEGMENT_NAME = 200;

/**
 * A name safe as one path segment on every store, and one to one: task ids may hold `/`, `:`, be `..`, or differ only in
 * case (on a case-insensitive disk `A` and `a` would share a file). Everything but lowercase letters, digits, `_` and `-`
 * is written `~xx` (its UTF-8 bytes in hex); a long name is cut and tagged with a hash of the whole id.
 */
export function segmentName(text: string): string {
  let name = '';
  for (const byte of new TextEncoder().encode(text)) {
    const char = String.fromCharCode(byte);
    name += /[a-z0-9_-]/.test(char) ? char : `~${byte.toString(16).padStart(2, '0')}`;
  }
  if (name.length <= MAX_SEGMENT_NAME) return name;
  const hash = hashOf(text);
  return `${name.slice(0, MAX_SEGMENT_NAME - hash.length - 1)}-${hash}`;
}
