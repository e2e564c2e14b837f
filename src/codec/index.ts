import type { PayloadCodec } from '@temporalio/common';
import { EncryptionCodec } from './encryption-codec';
import type { Environment } from '../config/environment';
import { encryptionKeysFromEnvironment } from './encryption-keys';

export { EncryptionCodec, ENCRYPTED_ENCODING, KEY_ID_METADATA_KEY } from './encryption-codec';
export type { EncryptionKey } from './encryption-codec';
export { encryptionKeysFromEnvironment } from './encryption-keys';
export { startCodecServer, DEFAULT_CODEC_CORS_ORIGINS } from './codec-server';
export type { CodecServer, CodecServerOptions } from './codec-server';

/** The payload codec configured by FANOUT_ENCRYPTION_KEYS (or FANOUT_ENCRYPTION_KEY + _ID); undefined when none is. */
export function codecFromEnvironment(environment: Environment = process.env): EncryptionCodec | undefined {
  const keys = encryptionKeysFromEnvironment(environment);
  return keys === undefined ? undefined : new EncryptionCodec(keys);
}

/**
 * The data converter for workers and clients: payload encryption when keys are configured, else undefined (the SDK's
 * default). Workers and clients of one task queue must agree: a client without the key cannot read an encrypted result.
 *
 * @example
 * const client = new Client({ connection, dataConverter: dataConverterFromEnvironment() });
 */
export function dataConverterFromEnvironment(
  environment: Environment = process.env,
): { payloadCodecs: PayloadCodec[] } | undefined {
  const codec = codecFromEnvironment(environment);
  return codec === undefined ? undefined : { payloadCodecs: [codec] };
}
