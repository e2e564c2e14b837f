import type { SimulatedRequest } from '../src/sim/simulator';
import { faultCost } from './support/request-ledger';

/** The crash tests' judge, on a made-up log: times in ms, one fault at 10,000 and one at 30,000. */
function request(taskId: string, arrivedAt: number, respondedAt: number | undefined, seq: number): SimulatedRequest {
  return {
    seq,
    taskId,
    workflowId: 'batch-x',
    attempt: 1,
    taskRequest: 1,
    arrivedAt,
    ...(respondedAt === undefined ? {} : { respondedAt, outcome: 200 }),
    latencyMs: 0,
    inFlightAtArrival: 0,
  };
}

describe('faultCost', () => {
  const log = [
    // Answered well before the first fault, then sent again after the second: a lost answer.
    request('early', 1000, 1200, 1),
    request('early', 31_000, 31_200, 2),
    // Open at the first fault (its answer written as the worker died), sent again after the second: that fault's cost.
    request('open-at-kill', 9800, 10_020, 3),
    request('open-at-kill', 31_000, 31_200, 4),
  ];

  it('flags an answer settled before every fault and sent again', () => {
    expect(faultCost(log, 30_000, 1000, [10_000]).answeredThenResent).toEqual(['early']);
  });

  it('counts a call open at an earlier fault against that fault, not as answered before the later one', () => {
    expect(faultCost(log, 10_000).openAt).toBe(1);
    expect(faultCost(log, 30_000).answeredThenResent.sort()).toEqual(['early', 'open-at-kill']);
    expect(faultCost(log, 30_000, 1000, [10_000]).answeredThenResent).not.toContain('open-at-kill');
  });

  it('counts a call started and answered while a cancel was reaching the lanes as in flight at that cancel', () => {
    // CI, seed 264255336: cancel called at 887 ms, the batch closed later; a lane started a call at 911 and its answer
    // (1022) came back as the cancel aborted it; the resumed batch sent it again after a later kill.
    const cancelled = [request('during-cancel', 911, 1022, 1), request('during-cancel', 28_985, 29_081, 2)];
    expect(faultCost(cancelled, 4566, 1000, [887]).answeredThenResent).toEqual(['during-cancel']);
    expect(faultCost(cancelled, 4566, 1000, [{ at: 887, until: 1500 }]).answeredThenResent).toEqual([]);
    expect(faultCost(cancelled, { at: 887, until: 1500 }).openAt).toBe(1);
  });

  it('sees a request never answered as open now', () => {
    expect(faultCost([...log, request('hung', 32_000, undefined, 5)], 40_000).openNow).toBe(1);
  });
});
