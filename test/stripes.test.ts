import { StripeMarks } from '../src/spool/stripes';
import { stripeConcurrency, stripesWanted } from '../src/contract/batch';
import { stripeStarts } from '../src/workflows/batch/stripe-plan';
import type { WindowStart } from '../src/workflows/batch/window';

/** Marks for `count` task lines of `width` bytes each (a blank line after every tenth). */
function marksOf(count: number, width = 30): { marks: StripeMarks; offsets: number[] } {
  const marks = new StripeMarks();
  const offsets: number[] = [];
  let offset = 0;
  for (let index = 0; index < count; index += 1) {
    marks.add(offset);
    offsets.push(offset);
    offset += width + (index % 10 === 9 ? 2 : 1);
  }
  return { marks, offsets };
}

describe('stripes: a wide batch cut into parts run side by side', () => {
  it.each([
    [4000, 3],
    [20_000, 5],
    [1_000_000, 32],
    [7, 3],
    [2, 5],
  ])('cuts %i items into %i stripes at task lines, their items adding up, about even', (count, parts) => {
    const { marks, offsets } = marksOf(count);
    const stripes = marks.split(parts);
    expect(stripes.length).toBe(Math.min(parts, count));
    expect(stripes[0].offset).toBe(0);
    expect(stripes.reduce((sum, stripe) => sum + stripe.items, 0)).toBe(count);
    let first = 0;
    for (const stripe of stripes) {
      // Each stripe starts at the line of its first item.
      expect(stripe.offset).toBe(offsets[first]);
      first += stripe.items;
      expect(Math.abs(stripe.items - count / stripes.length)).toBeLessThanOrEqual(Math.max(1, count / 1000));
    }
  });

  it('asks for stripes of at most windowCalls calls, none with a budget or a provider batch, at most 32', () => {
    expect(stripesWanted(undefined)).toBe(1);
    expect(stripesWanted({ concurrency: 200 })).toBe(1);
    expect(stripesWanted({ concurrency: 500 })).toBe(3);
    expect(stripesWanted({ concurrency: 1000 })).toBe(5);
    expect(stripesWanted({ concurrency: 12, windowCalls: 4 })).toBe(3);
    expect(stripesWanted({ concurrency: 5000, windowCalls: 1 })).toBe(32);
    expect(stripesWanted({ concurrency: 500, costBudgetUsd: 1 })).toBe(1);
    expect(stripesWanted({ concurrency: 500, tokenBudget: 1000 })).toBe(1);
    expect(stripesWanted({ concurrency: 500, route: 'provider-batch' })).toBe(1);
  });

  it('shares the concurrency out over the stripes, every call slot once', () => {
    for (const [concurrency, stripes] of [
      [500, 3],
      [1000, 5],
      [7, 3],
    ]) {
      const shares = Array.from({ length: stripes }, (_, stripe) => stripeConcurrency(concurrency, stripes, stripe));
      expect(shares.reduce((sum, share) => sum + share, 0)).toBe(concurrency);
      expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1);
    }
  });

  it("starts each stripe's first window at its first item, ending where the next begins", () => {
    const first: WindowStart = {
      cursor: 0,
      firstPage: { entries: [], nextOffset: 10, eof: true },
      retries: [],
      borrowed: 0,
      unstarted: 10,
      spent: { tokens: 0, usd: 0 },
    };
    expect(stripeStarts(first, undefined)).toEqual([first]);
    const starts = stripeStarts(first, [
      { offset: 0, items: 4 },
      { offset: 100, items: 3 },
      { offset: 200, items: 3 },
    ]);
    expect(starts.map(({ cursor, end, unstarted }) => ({ cursor, end, unstarted }))).toEqual([
      { cursor: 0, end: 100, unstarted: 4 },
      { cursor: 100, end: 200, unstarted: 3 },
      { cursor: 200, end: undefined, unstarted: 3 },
    ]);
    expect(starts[0].firstPage).toBe(first.firstPage);
    expect(starts[1].firstPage).toBeUndefined();
  });
});
