import {
  LANE_SHARE,
  laneDepth,
  laneParallelism,
  LANE_TARGET_MS,
  laneShareFor,
  MAX_LANE_DEPTH,
  PREVIOUS_SHARE,
} from '../src/workflows/batch/lane-shape';

/** Lanes a batch would start, in order, if every lane took what laneDepth gave it. */
function lanesFor(items: number, concurrency: number, callMs?: number, share?: number): number[] {
  const lanes: number[] = [];
  for (let unstarted = items; unstarted > 0;) {
    const depth = laneDepth({ unstarted, concurrency, callMs, share });
    lanes.push(depth);
    unstarted -= depth;
  }
  return lanes;
}

describe('the lane shape', () => {
  it('shrinks lanes as the batch nears its end, so the last ones are one item long', () => {
    const lanes = lanesFor(4000, 500, 3000);
    expect(lanes.reduce((sum, depth) => sum + depth, 0)).toBe(4000);
    expect(lanes[0]).toBe(4);
    expect(lanes.slice(-500).every((depth) => depth === 1)).toBe(true);
    for (let index = 1; index < lanes.length; index += 1) expect(lanes[index]).toBeLessThanOrEqual(lanes[index - 1]);
  });

  it('takes a whole share per slot (LANE_SHARE), in fewer lanes than windows before it (PREVIOUS_SHARE) took', () => {
    const lanes = lanesFor(4000, 500, 3000, LANE_SHARE);
    expect(lanes.reduce((sum, depth) => sum + depth, 0)).toBe(4000);
    expect(lanes[0]).toBe(8);
    expect(lanes.slice(-400).every((depth) => depth === 1)).toBe(true);
    for (let index = 1; index < lanes.length; index += 1) expect(lanes[index]).toBeLessThanOrEqual(lanes[index - 1]);
    // Fewer lanes: fewer workflow tasks replacing lanes that end together.
    expect(lanes.length).toBeLessThan(lanesFor(4000, 500, 3000, PREVIOUS_SHARE).length * 0.8);
    // A window started before LANE_SHARE (no laneShare in its input) keeps its share when it replays.
    expect(lanesFor(4000, 500, 3000)).toEqual(lanesFor(4000, 500, 3000, PREVIOUS_SHARE));
  });

  it('gives a batch with a token or dollar budget half a share, so a lane ends (and reports its spend) sooner', () => {
    expect(laneShareFor(undefined)).toBe(LANE_SHARE);
    expect(laneShareFor({})).toBe(LANE_SHARE);
    expect(laneShareFor({ tokenBudget: 60 })).toBe(PREVIOUS_SHARE);
    expect(laneShareFor({ costBudgetUsd: 0.001 })).toBe(PREVIOUS_SHARE);
  });

  it('keeps a lane to about LANE_TARGET_MS of calls once their length is known', () => {
    expect(laneDepth({ unstarted: 1_000_000, concurrency: 100, callMs: 5000 })).toBe(Math.floor(LANE_TARGET_MS / 5000));
    expect(laneDepth({ unstarted: 1_000_000, concurrency: 100, callMs: 1 })).toBe(MAX_LANE_DEPTH);
  });

  it('stays shallow until a call has answered, and never goes past the batch itemsPerActivity', () => {
    expect(laneDepth({ unstarted: 1_000_000, concurrency: 10, callMs: undefined })).toBe(8);
    expect(laneDepth({ unstarted: 1_000_000, concurrency: 10, callMs: 10, maxDepth: 1 })).toBe(1);
    expect(laneDepth({ unstarted: 3, concurrency: 1, callMs: 10 })).toBe(2);
  });

  it('gives an item a lane of its own when there are fewer items than slots', () => {
    expect(lanesFor(20, 50, 10_000)).toEqual(Array.from({ length: 20 }, () => 1));
  });

  it('runs calls side by side in a lane only when the concurrency outgrows one workflow', () => {
    expect(laneParallelism(500, 1000)).toBe(1);
    expect(laneParallelism(1000, 1000)).toBe(1);
    expect(laneParallelism(2000, 1000)).toBe(2);
  });
});
