import { QueryGate, type DescribableRun } from '../src/client/query-gate';

/** A run whose describe answers what the test last set. */
function runOf(): DescribableRun & { now: { runId: string; historyLength: number; preparing?: boolean } } {
  const run = {
    now: { runId: 'r1', historyLength: 5 } as { runId: string; historyLength: number; preparing?: boolean },
    describe: async () => ({ ...run.now }),
  };
  return run;
}

describe('QueryGate: a watcher queries (a billed action) only when a free describe says there is something new', () => {
  it('lets a query through when the run moved and the interval has passed, once per move', async () => {
    const run = runOf();
    const gate = new QueryGate(run, { minIntervalMs: 5000 });
    expect(await gate.due(0)).toBe(true);
    expect(await gate.due(6000)).toBe(false);
    run.now = { runId: 'r1', historyLength: 9 };
    expect(await gate.due(7000)).toBe(true);
    run.now = { runId: 'r1', historyLength: 12 };
    expect(await gate.due(10_000)).toBe(false);
    expect(await gate.due(12_000)).toBe(true);
    run.now = { runId: 'r2', historyLength: 12 };
    expect(await gate.due(17_000)).toBe(true);
  });

  it('lets none through while the run is preparing (a batch before its first window), then the first look once it is not', async () => {
    const run = runOf();
    run.now = { runId: 'r1', historyLength: 5, preparing: true };
    const gate = new QueryGate(run, { minIntervalMs: 5000 });
    expect(await gate.due(0)).toBe(false);
    expect(await gate.due(1000)).toBe(false);
    // No query was made, so none counts against the interval: the first look comes as soon as the batch runs.
    run.now = { runId: 'r1', historyLength: 12 };
    expect(await gate.due(2000)).toBe(true);
  });
});
