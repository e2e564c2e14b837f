import type { ProviderBatchStats } from '../src/sim/provider-batches';
import type { SimulatedRequest } from '../src/sim/simulator';
import {
  answeredBeforeStopSentAgain,
  killCharge,
  providerRoute,
  startedAfterStop,
  stopReachedAt,
} from './support/fault-judge';
import { faultCost } from './support/request-ledger';

/** The fault schedule's judge on made-up logs: times in ms. */
let seq = 0;
function request(
  taskId: string,
  arrivedAt: number,
  end: { respondedAt?: number; clientClosedAt?: number },
  lane: { worker?: string; caller?: string } = {},
): SimulatedRequest {
  seq += 1;
  return {
    seq,
    taskId,
    workflowId: 'batch-x',
    attempt: 1,
    taskRequest: 1,
    arrivedAt,
    ...(end.respondedAt === undefined ? {} : { respondedAt: end.respondedAt, outcome: 200 }),
    ...(end.clientClosedAt === undefined ? {} : { clientClosedAt: end.clientClosedAt }),
    ...lane,
    latencyMs: 0,
    inFlightAtArrival: 0,
  };
}

const A = { worker: 'w0', caller: 'window-0' };
const B = { worker: 'w1', caller: 'window-1' };

describe('stopReachedAt', () => {
  it("is the stop's first abort by a live worker, else the workflow's record, else the run's close", () => {
    const log = [
      request('killed', 100, { clientClosedAt: 1100 }, { worker: 'dead' }),
      request('a', 900, { clientClosedAt: 1300 }, A),
      request('b', 900, { clientClosedAt: 1200 }, B),
    ];
    expect(stopReachedAt(log, 1000, 5000, 1050, new Set(['dead']))).toBe(1200);
    expect(stopReachedAt([], 1000, 5000, 1050)).toBe(1050);
    expect(stopReachedAt([], 1000, 5000, undefined)).toBe(5000);
  });
});

describe('startedAfterStop', () => {
  const log = [
    request('aborted-b', 900, { clientClosedAt: 1000 }, B),
    // Lane A had not heard of the stop yet: started after B's abort, before its own.
    request('a-before-its-abort', 1100, { respondedAt: 1200 }, A),
    request('aborted-a', 1150, { clientClosedAt: 1500 }, A),
    // Started by lane A after its own abort: spend the stop promised not to make.
    request('a-after-its-abort', 1600, { respondedAt: 1700 }, A),
    // The resume's calls.
    request('resumed', 3000, { respondedAt: 3100 }, A),
  ];

  it('flags every call started after the first abort, until the resume', () => {
    expect(startedAfterStop(log, 1000, 2000).map((call) => call.id)).toEqual([
      'a-before-its-abort',
      'aborted-a',
      'a-after-its-abort',
    ]);
  });

  it('per lane, flags a call its own lane started after the stop aborted one of its calls', () => {
    expect(startedAfterStop(log, 1000, 2000, true).map((call) => call.id)).toEqual(['a-after-its-abort']);
  });
});

describe('answeredBeforeStopSentAgain', () => {
  it('flags an answer written before the stop reached the batch and sent again, which the crash settle excuses', () => {
    // A cancel called at 1000 reaches the batch at 1400; an answer written at 1250 is dropped and the resume sends it.
    const log = [
      request('dropped', 1100, { respondedAt: 1250 }, A),
      request('aborted', 1300, { clientClosedAt: 1400 }, A),
      request('dropped', 3000, { respondedAt: 3100 }, A),
      request('aborted', 3000, { respondedAt: 3100 }, A),
    ];
    expect(faultCost(log, { at: 1000, until: 1400 }).answeredThenResent).toEqual([]);
    expect(answeredBeforeStopSentAgain(log, 1400, [])).toEqual(['dropped']);
  });

  it('excuses an answer written within the margin before the stop, or open at an earlier kill', () => {
    const log = [
      request('racing', 1300, { respondedAt: 1380 }, A),
      request('at-kill', 400, { respondedAt: 600 }, A),
      request('racing', 3000, { respondedAt: 3100 }, A),
      request('at-kill', 700, { respondedAt: 800 }, A),
    ];
    expect(answeredBeforeStopSentAgain(log, 1400, [{ at: 650, until: 650 }])).toEqual([]);
  });
});

describe('killCharge', () => {
  it("charges a kill with the killed worker's open calls, not with calls an earlier stop left unanswered", () => {
    const log = [
      request('victim', 1900, { clientClosedAt: 2000 }, { worker: 'dead' }),
      request('survivor', 1900, { respondedAt: 2100 }, { worker: 'live' }),
      request('cancelled-earlier', 100, { clientClosedAt: 200 }, { worker: 'live' }),
      request('victim', 2500, { respondedAt: 2600 }, { worker: 'live' }),
      request('cancelled-earlier', 2500, { respondedAt: 2600 }, { worker: 'live' }),
    ];
    expect(killCharge(log, 2000, 'dead', Infinity)).toEqual({
      sentAgain: ['victim'],
      victims: ['victim'],
      survivorsSentAgain: [],
    });
    const survivorAgain = [...log, request('survivor', 2500, { respondedAt: 2600 }, { worker: 'live' })];
    expect(killCharge(survivorAgain, 2000, 'dead', Infinity).survivorsSentAgain).toEqual(['survivor']);
  });

  it('does not charge a kill with a call a live worker aborted itself just before it, unanswered', () => {
    // A lane on the live worker heard of a cancel late and aborted its call 5 ms inside the settle time; the resume
    // sends it again after the kill. Answered, it would be charged (the live worker may not have read it).
    const log = [
      request('victim', 1900, { clientClosedAt: 2000 }, { worker: 'dead' }),
      request('aborted-by-live', 400, { clientClosedAt: 1005 }, { worker: 'live' }),
      request('victim', 2500, { respondedAt: 2600 }, { worker: 'live' }),
      request('aborted-by-live', 2500, { respondedAt: 2600 }, { worker: 'live' }),
    ];
    expect(killCharge(log, 2000, 'dead', Infinity).sentAgain).toEqual(['victim']);
    const answered = [
      ...log,
      request('answered-live', 400, { respondedAt: 1005 }, { worker: 'live' }),
      request('answered-live', 2500, { respondedAt: 2600 }, { worker: 'live' }),
    ];
    expect(killCharge(answered, 2000, 'dead', Infinity).sentAgain).toEqual(['victim', 'answered-live']);
  });
});

describe('providerRoute', () => {
  it('finds a part created twice, an item answered twice, and one answered by the provider and sent sync', () => {
    const batch = (id: string, part: number, answered: string[]) => ({
      id,
      provider: 'openai' as const,
      metadata: { fanout_batch: 'batch-x', fanout_run: 'r', fanout_part: String(part) },
      items: answered.length,
      status: 'completed',
      answered,
    });
    const stats = {
      batches: [batch('b1', 0, ['a', 'b']), batch('b2', 0, ['b']), batch('b3', 1, ['c'])],
    } as unknown as ProviderBatchStats;
    expect(providerRoute(stats, 'batch-x', [request('c', 10, { respondedAt: 20 })])).toEqual({
      created: 3,
      answered: 4,
      partsCreatedTwice: ['r/0'],
      answeredTwice: ['b'],
      answeredAndSentSync: ['c'],
    });
  });
});
