import type { PacerSnapshot } from '../pacing/key-pacer';

/**
 * Turns the pacer's running 429 counts (per provider + model + key, see src/pacing/) into increments: the pacer waits
 * out most 429s inside an attempt, so they never surface as activity failures. Each call returns what was added
 * since the previous one, by model.
 */
export class PacerRateLimitReader {
  private readonly seen = new Map<string, number>();

  constructor(private readonly snapshot: () => PacerSnapshot[]) {}

  increments(): Map<string, number> {
    const byModel = new Map<string, number>();
    for (const key of this.snapshot()) {
      const id = `${key.provider}\u0000${key.model}\u0000${key.keyId}`;
      const added = key.rateLimited - (this.seen.get(id) ?? 0);
      this.seen.set(id, key.rateLimited);
      if (added > 0) byModel.set(key.model, (byModel.get(key.model) ?? 0) + added);
    }
    return byModel;
  }
}
