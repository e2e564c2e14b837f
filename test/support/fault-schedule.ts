/**
 * The fault schedule of test/fault-schedule.test.ts, drawn from a seed (pure, so a seed replays the same schedule and
 * the fixed seeds' cover can be checked without running them). A seed runs one batch of one shape:
 *
 * - `sync`: short calls on a local disk or long ones on S3, in three stripes of windows that hand over every two pages
 *   and lend their slots as they end, through three faults drawn from a worker SIGKILL, a server SIGKILL and a cancel
 *   followed by a resume;
 * - `budget`: one window with a token budget that runs out mid-run (its stop is the fault judged), in half the
 *   schedules after a worker SIGKILL, then a resume without the budget, in stripes, to finish;
 * - `provider`: `--route provider-batch`, the worker running it SIGKILLed in some of its phases (upload, create, poll,
 *   download; each in about two schedules of three), with items the provider never answers handed back to be sent sync.
 */

/** mulberry32: the schedule's dice. */
export function dice(start: number): () => number {
  let state = start >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type ProviderPhase = 'upload' | 'create' | 'poll' | 'download';
export const PROVIDER_PHASES: readonly ProviderPhase[] = ['upload', 'create', 'poll', 'download'];

export type FaultKind = 'kill-worker' | 'kill-server' | 'cancel-resume' | 'budget-stop' | 'provider-kill';
export type Shape = 'sync' | 'budget' | 'provider';

export interface PlannedFault {
  kind: FaultKind;
  /** Answers seen before it strikes (sync and budget shapes). */
  after: number;
  /** The phase a provider-kill waits for. */
  phase?: ProviderPhase;
  /** Which of the two workers a kill-worker (or a provider-kill in the poll phase) takes. */
  victim: number;
}

export interface Schedule {
  seed: number;
  shape: Shape;
  /** Calls of 0.8-2.3 s with the task file and sink on S3, else of 60-260 ms on a local disk. */
  long: boolean;
  items: number;
  concurrency: number;
  /** Simulated latency of each item, ms (the prompt's marker). */
  latencies: number[];
  faults: PlannedFault[];
  /** The budget shape's token budget, as a share of what every item would spend. */
  budgetShare?: number;
}

/** The seed's schedule. */
export function scheduleOf(seed: number): Schedule {
  const roll = dice(seed);
  const pick = <T>(from: readonly T[]): T => from[Math.floor(roll() * from.length)];
  const shapeRoll = roll();
  const shape: Shape = shapeRoll < 0.5 ? 'sync' : shapeRoll < 0.75 ? 'budget' : 'provider';
  const long = shape === 'sync' && roll() < 0.4;
  const items = shape === 'provider' ? 24 : long ? 48 : 120;
  const concurrency = 12;
  const latencies = Array.from({ length: items }, () =>
    long ? 800 + Math.floor(roll() * 1500) : 60 + Math.floor(roll() * 200),
  );
  const faults: PlannedFault[] = [];
  if (shape === 'sync') {
    for (let index = 0; index < 3; index += 1)
      faults.push({
        kind: pick(['kill-worker', 'kill-server', 'cancel-resume'] as const),
        after: Math.floor((0.1 + roll() * 0.6) * items),
        victim: Math.floor(roll() * 2),
      });
    faults.sort((a, b) => a.after - b.after);
  } else if (shape === 'budget') {
    const budgetShare = 0.45 + roll() * 0.2;
    const kill = { kind: 'kill-worker' as const, after: Math.floor((0.1 + roll() * 0.15) * items) };
    if (roll() < 0.5) faults.push({ ...kill, victim: Math.floor(roll() * 2) });
    faults.push({ kind: 'budget-stop', after: Math.floor(budgetShare * items), victim: 0 });
    return { seed, shape, long, items, concurrency, latencies, faults, budgetShare };
  } else {
    // Each phase in about two schedules of three, at least one, in the order the route goes through them.
    const always = Math.floor(roll() * PROVIDER_PHASES.length);
    for (const [index, phase] of PROVIDER_PHASES.entries())
      if (roll() < 0.6 || index === always)
        faults.push({ kind: 'provider-kill', after: 0, phase, victim: Math.floor(roll() * 2) });
  }
  return { seed, shape, long, items, concurrency, latencies, faults };
}

/** What a set of seeds covers: every fault kind and every provider phase drawn. */
export function coverOf(seeds: readonly number[]): Set<string> {
  const cover = new Set<string>();
  for (const seed of seeds) {
    const schedule = scheduleOf(seed);
    cover.add(`${schedule.shape}${schedule.long ? ' long' : ''}`);
    for (const fault of schedule.faults) cover.add(fault.phase ? `${fault.kind} ${fault.phase}` : fault.kind);
  }
  return cover;
}

/** Everything the fixed seeds must cover between them. */
export const EVERY_KIND: readonly string[] = [
  'sync',
  'budget',
  'provider',
  'kill-worker',
  'kill-server',
  'cancel-resume',
  'budget-stop',
  ...PROVIDER_PHASES.map((phase) => `provider-kill ${phase}`),
];
