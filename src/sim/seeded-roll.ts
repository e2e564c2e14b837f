import { createHash } from 'node:crypto';

/** A number in [0, 1) fixed by the seed and the parts: the same inputs always give the same value. */
export function roll(seed: string | number, ...parts: (string | number)[]): number {
  const digest = createHash('sha256')
    .update([seed, ...parts].join('\u0000'))
    .digest();
  return digest.readUInt32BE(0) / 2 ** 32;
}
