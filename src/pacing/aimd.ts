/**
 * An adaptive concurrency limit, additive-increase / multiplicative-decrease as TCP does it: it doubles per round
 * trip while nothing pushes back (slow start), then grows by about one per round trip, and halves when the provider
 * answers 429. Several processes sharing one provider limit, each with its own AIMD, settle on fair shares of it.
 */
export interface AimdOptions {
  /** Starting limit. */
  initial: number;
  /** Lowest limit. Default 1. */
  minimum?: number;
  /** Highest limit. */
  maximum: number;
  /** Factor applied on a rate limit. Default 0.5. */
  decrease?: number;
}

export interface LimitChange {
  at: number;
  from: number;
  to: number;
  reason: string;
}

export class AimdLimit {
  private value: number;
  private threshold = Number.POSITIVE_INFINITY;
  private readonly minimum: number;
  private readonly maximum: number;
  private readonly decrease: number;
  /** Admissions numbered in order; a 429 of a request admitted before the last decrease does not decrease again. */
  private lastDecreaseSeq = -1;

  constructor(options: AimdOptions) {
    this.minimum = options.minimum ?? 1;
    this.maximum = options.maximum;
    this.decrease = options.decrease ?? 0.5;
    if (!(options.initial >= this.minimum && options.initial <= this.maximum)) {
      throw new TypeError(
        `AimdLimit: initial (${options.initial}) must be between minimum (${this.minimum}) and maximum (${this.maximum})`,
      );
    }
    this.value = options.initial;
  }

  /** The whole number of requests that may be in flight. */
  get limit(): number {
    return Math.floor(this.value);
  }

  get slowStart(): boolean {
    return this.value < this.threshold;
  }

  /**
   * A request that was admitted while the limit was what held others back came back fine: grow. Returns the change
   * when the whole-number limit moved.
   */
  grow(now: number): LimitChange | undefined {
    const from = this.limit;
    this.value = Math.min(this.maximum, this.slowStart ? this.value + 1 : this.value + 1 / this.value);
    return this.limit === from
      ? undefined
      : { at: now, from, to: this.limit, reason: this.slowStart ? 'slow start' : 'additive increase' };
  }

  /**
   * The provider pushed back on the request admitted as number `admittedSeq`. Shrinks once per round trip: pushback on
   * requests that were already in flight at the last decrease is the same event.
   */
  shrink(now: number, admittedSeq: number, currentSeq: number, reason: string): LimitChange | undefined {
    if (admittedSeq <= this.lastDecreaseSeq) return undefined;
    this.lastDecreaseSeq = currentSeq;
    const from = this.limit;
    this.value = Math.max(this.minimum, this.value * this.decrease);
    this.threshold = this.value;
    return this.limit === from ? undefined : { at: now, from, to: this.limit, reason };
  }
}
