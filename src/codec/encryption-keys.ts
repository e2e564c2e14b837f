import type { Environment } from '../config/environment';
import type { EncryptionKey } from './encryption-codec';

const KEY_BYTES = 32;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const HOW_TO_MAKE = 'make one with `openssl rand -base64 32`';

/** Decodes one base64 key, naming the variable and key id (never the key) when it is not 32 bytes of base64. */
function decodeKey(variable: string, id: string, encoded: string): Uint8Array {
  const bytes = Buffer.from(encoded, 'base64');
  // Buffer.from skips characters that are not base64, so a typo would silently make a different key.
  if (!BASE64.test(encoded) || bytes.toString('base64') !== encoded.padEnd(Math.ceil(encoded.length / 4) * 4, '=')) {
    throw new Error(`${variable}: key "${id}" is not valid base64 (${HOW_TO_MAKE})`);
  }
  if (bytes.length !== KEY_BYTES) {
    throw new Error(
      `${variable}: key "${id}" must be ${KEY_BYTES} bytes for AES-256, got ${bytes.length} (${HOW_TO_MAKE})`,
    );
  }
  return new Uint8Array(bytes);
}

function parseKeyList(raw: string): EncryptionKey[] {
  const variable = 'FANOUT_ENCRYPTION_KEYS';
  const keys: EncryptionKey[] = [];
  const entries = raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  if (entries.length === 0) throw new Error(`${variable} is set but lists no key; expected "<id>:<base64 key>,..."`);
  entries.forEach((entry, index) => {
    const colon = entry.indexOf(':');
    const id = colon < 0 ? '' : entry.slice(0, colon).trim();
    if (id === '') throw new Error(`${variable}: entry ${index + 1} must be "<id>:<base64 key>"`);
    if (keys.some((key) => key.id === id)) throw new Error(`${variable}: key id "${id}" is listed twice`);
    keys.push({ id, key: decodeKey(variable, id, entry.slice(colon + 1).trim()) });
  });
  return keys;
}

/**
 * Reads the payload encryption keys from the environment; undefined when none is configured.
 *
 * - `FANOUT_ENCRYPTION_KEYS="k2:<base64>,k1:<base64>"`: the first key encrypts, every listed key decrypts (rotation:
 *   put the new key first and keep the old ones while histories written with them are still read).
 * - or `FANOUT_ENCRYPTION_KEY=<base64>` with `FANOUT_ENCRYPTION_KEY_ID=<id>`: one key.
 *
 * Each key is 32 random bytes in base64. Errors name the variable and key id, never the key.
 */
export function encryptionKeysFromEnvironment(environment: Environment = process.env): EncryptionKey[] | undefined {
  const list = environment.FANOUT_ENCRYPTION_KEYS?.trim() || undefined;
  const single = environment.FANOUT_ENCRYPTION_KEY?.trim() || undefined;
  const singleId = environment.FANOUT_ENCRYPTION_KEY_ID?.trim() || undefined;
  if (list !== undefined) {
    if (single !== undefined || singleId !== undefined) {
      throw new Error(
        'set either FANOUT_ENCRYPTION_KEYS or FANOUT_ENCRYPTION_KEY with FANOUT_ENCRYPTION_KEY_ID, not both',
      );
    }
    return parseKeyList(list);
  }
  if (single === undefined && singleId === undefined) return undefined;
  if (single === undefined) throw new Error('FANOUT_ENCRYPTION_KEY_ID is set but FANOUT_ENCRYPTION_KEY is not');
  if (singleId === undefined) {
    // The id is stored with every payload; without one, a later rotation could not tell which key wrote it.
    throw new Error(
      'FANOUT_ENCRYPTION_KEY_ID must be set with FANOUT_ENCRYPTION_KEY (it is stored with each payload so rotated keys can be found)',
    );
  }
  if (singleId.includes(',') || singleId.includes(':')) {
    throw new Error(`FANOUT_ENCRYPTION_KEY_ID must not contain "," or ":", got "${singleId}"`);
  }
  return [{ id: singleId, key: decodeKey('FANOUT_ENCRYPTION_KEY', singleId, single) }];
}
