import type { Stripe } from '../contract/batch-activities';

/** Marks kept at most: the stripes' sizes are even to within 1 / (MAX_MARKS / 2) of the file. */
const MAX_MARKS = 4096;

/**
 * The byte offsets of every `step`-th task line of a file, gathered in one pass however long the file: when the marks
 * fill up, every other one goes and the step doubles. Where the file can be cut into stripes of about equal item counts.
 */
export class StripeMarks {
  private step = 1;
  private readonly offsets: number[] = [];
  private seen = 0;

  /** Called with the offset of each task line, in order. */
  add(offset: number): void {
    if (this.seen % this.step === 0) {
      this.offsets.push(offset);
      if (this.offsets.length >= MAX_MARKS) {
        let kept = 0;
        for (let index = 0; index < this.offsets.length; index += 2) this.offsets[kept++] = this.offsets[index];
        this.offsets.length = kept;
        this.step *= 2;
      }
    }
    this.seen += 1;
  }

  /**
   * The file cut into at most `parts` stripes of about equal item counts, each starting at a task line, in the file's
   * order (fewer when the file has fewer items than parts). Their items add up to every task line added.
   */
  split(parts: number): Stripe[] {
    const marks: number[] = [];
    for (let part = 0; part < parts; part += 1) {
      const mark = Math.round((part * this.offsets.length) / parts);
      if (mark < this.offsets.length && mark !== marks[marks.length - 1]) marks.push(mark);
    }
    return marks.map((mark, index) => ({
      offset: this.offsets[mark],
      items: (index + 1 < marks.length ? marks[index + 1] * this.step : this.seen) - mark * this.step,
    }));
  }
}
