import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { METADATA_ENCODING_KEY, type Payload, type PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';

/** The `encoding` of a payload this codec encrypted; anything else passes through decode untouched. */
export const ENCRYPTED_ENCODING = 'binary/encrypted';
/** Metadata naming the key a payload was encrypted with, so a rotated-out key can still be picked to read it. */
export const KEY_ID_METADATA_KEY = 'encryption-key-id';

const ALGORITHM = 'aes-256-gcm';
const KEY_BYTES = 32;
/** 96-bit IVs are GCM's native size; a fresh random one per payload keeps (key, IV) pairs from repeating. */
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** One AES-256 key and the id stored beside every payload it encrypts. */
export interface EncryptionKey {
  readonly id: string;
  /** 32 bytes. */
  readonly key: Uint8Array;
}

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

/**
 * A payload codec that encrypts every payload with AES-256-GCM.
 *
 * The whole payload (metadata and data, serialized as the Payload protobuf) is encrypted, so the stored payload shows
 * neither the value nor how it was encoded. The key id is authenticated as additional data: a payload cannot be made
 * to look as if another key wrote it. Decode picks the key by the id in the payload's metadata, so payloads written
 * before a rotation stay readable while the retired key is still listed.
 *
 * @example
 * const codec = new EncryptionCodec([{ id: 'k2', key: newKey }, { id: 'k1', key: oldKey }]); // encrypts with k2
 * const client = new Client({ connection, dataConverter: { payloadCodecs: [codec] } });
 */
export class EncryptionCodec implements PayloadCodec {
  private readonly keysById: ReadonlyMap<string, Uint8Array>;
  private readonly current: EncryptionKey;

  /** @param keys the first encrypts; all of them decrypt. */
  constructor(keys: readonly EncryptionKey[]) {
    if (keys.length === 0) throw new TypeError('EncryptionCodec needs at least one key');
    const byId = new Map<string, Uint8Array>();
    for (const { id, key } of keys) {
      if (id === '') throw new TypeError('an encryption key id must not be empty');
      if (byId.has(id)) throw new TypeError(`encryption key id "${id}" is listed twice`);
      if (key.length !== KEY_BYTES)
        throw new TypeError(`encryption key "${id}" must be ${KEY_BYTES} bytes, got ${key.length}`);
      byId.set(id, key);
    }
    this.keysById = byId;
    this.current = keys[0];
  }

  /** The id of the key new payloads are encrypted with. */
  get encryptingKeyId(): string {
    return this.current.id;
  }

  /** Ids of every key this codec can decrypt with. */
  get keyIds(): string[] {
    return [...this.keysById.keys()];
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.encrypt(payload));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => this.decrypt(payload));
  }

  private encrypt(payload: Payload): Payload {
    const { id, key } = this.current;
    const plain = temporal.api.common.v1.Payload.encode(payload).finish();
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(textEncoder.encode(id));
    const encrypted = Buffer.concat([cipher.update(plain), cipher.final()]);
    return {
      metadata: {
        [METADATA_ENCODING_KEY]: textEncoder.encode(ENCRYPTED_ENCODING),
        [KEY_ID_METADATA_KEY]: textEncoder.encode(id),
      },
      // Layout: IV | ciphertext | tag.
      data: Buffer.concat([iv, encrypted, cipher.getAuthTag()]),
    };
  }

  private decrypt(payload: Payload): Payload {
    const encoding = payload.metadata?.[METADATA_ENCODING_KEY];
    if (encoding === undefined || encoding === null || textDecoder.decode(encoding) !== ENCRYPTED_ENCODING)
      return payload;
    const idBytes = payload.metadata?.[KEY_ID_METADATA_KEY];
    if (!idBytes) throw new Error(`an encrypted payload has no "${KEY_ID_METADATA_KEY}" metadata`);
    const id = textDecoder.decode(idBytes);
    const key = this.keysById.get(id);
    if (!key) {
      throw new Error(
        `a payload was encrypted with key "${id}", which is not configured (known: ${this.keyIds.join(', ')}); ` +
          'keep retired keys in FANOUT_ENCRYPTION_KEYS after the current one',
      );
    }
    const data = payload.data ?? new Uint8Array();
    if (data.length < IV_BYTES + TAG_BYTES)
      throw new Error(`an encrypted payload (key "${id}") is too short to be one`);
    const decipher = createDecipheriv(ALGORITHM, key, data.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
    decipher.setAAD(idBytes);
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
    let plain: Buffer;
    try {
      plain = Buffer.concat([decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw new Error(
        `an encrypted payload failed authentication with key "${id}": the key is wrong or the payload was altered`,
      );
    }
    return temporal.api.common.v1.Payload.decode(plain);
  }
}
