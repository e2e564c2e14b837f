import type { PacerSnapshot } from '../pacing/key-pacer';
import { pacerRateLimitedTotal, pacerSnapshot } from '../pacing/pacer';

/**
 * Turns the pacer's running 429 counts (per provider + model + key, see src/pacing/) into increments: the pacer waits
 * out most 429s inside an attempt, so they never surface as activity failures. Each call returns what was added
 * since the previous one, by model.
 */
export class PacerRateLimitReader {
  private readonly seen = new Map<string, number>();
  private lastTotal = -1;

  /**
   * `total`, when given, is a cheap running count of every key's 429s: while it has not moved, no snapshot is taken
   * (it is read after every agent call). The process pacer's own snapshot comes with its total.
   */
  constructor(
    private readonly snapshot: () => PacerSnapshot[],
    private readonly total: (() => number) | undefined = snapshot === pacerSnapshot ? pacerRateLimitedTotal : undefined,
  ) {}

  increments(): Map<string, number> {
    const byModel = new Map<string, number>();
    if (this.total) {
      const total = this.total();
      if (total === this.lastTotal) return byModel;
      this.lastTotal = total;
    }
    for (const key of this.snapshot()) {
      const id = `${key.provider}\u0000${key.model}\u0000${key.keyId}`;
      const added = key.rateLimited - (this.seen.get(id) ?? 0);
      this.seen.set(id, key.rateLimited);
      if (added > 0) byModel.set(key.model, (byModel.get(key.model) ?? 0) + added);
    }
    return byModel;
  }
}
