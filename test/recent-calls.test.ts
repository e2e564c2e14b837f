import { RecentCalls } from '../src/activities/recent-calls';

describe("RecentCalls: how long a worker's recent calls of a model took", () => {
  it('reports nothing until ten calls of the model have answered, then their moving average', () => {
    let now = 0;
    const recent = new RecentCalls(() => now);
    for (let call = 0; call < 9; call += 1) recent.record('m', 200);
    expect(recent.typicalMs('m')).toBeUndefined();
    recent.record('m', 200);
    expect(recent.typicalMs('m')).toBe(200);
    recent.record('m', 1200);
    expect(recent.typicalMs('m')).toBe(300);
    expect(recent.typicalMs('other')).toBeUndefined();
    now += 60_000;
    expect(recent.typicalMs('m')).toBe(300);
  });

  it('forgets a model not called for ten minutes, and starts over from its next call', () => {
    let now = 0;
    const recent = new RecentCalls(() => now);
    for (let call = 0; call < 20; call += 1) recent.record('m', 100);
    now += 10 * 60_000 + 1;
    expect(recent.typicalMs('m')).toBeUndefined();
    for (let call = 0; call < 9; call += 1) recent.record('m', 5000);
    expect(recent.typicalMs('m')).toBeUndefined();
    recent.record('m', 5000);
    expect(recent.typicalMs('m')).toBe(5000);
  });
});
