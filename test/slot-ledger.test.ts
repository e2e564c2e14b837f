import { fc, test } from '@fast-check/jest';
import { stripeConcurrency } from '../src/contract/batch';
import { StripeLending, WindowLedger, type Lendable } from '../src/workflows/batch/slot-ledger';

/**
 * The slot ledger (src/workflows/batch/slot-ledger.ts) driven through random interleavings of a batch's events: calls
 * that start and end, hand-overs, lending between stripes, signals delivered in any order, a stop and a resume. The
 * model wires the real ledgers together as window.ts, window-slots.ts and batch.ts do with signals, and checks the
 * invariant after every event.
 */

/** Fixed, so a failure is the same on every machine; a failure prints its shrunk interleaving. */
const SEED = 20_261_206;
const RUNS = 3000;

interface Scenario {
  concurrency: number;
  width: number;
  windowCalls: number;
}

interface ModelWindow {
  id: number;
  stripe: number;
  ledger: WindowLedger;
  mode: 'running' | 'draining' | 'stopping' | 'ended';
  /** No item left to start. */
  ranOut: boolean;
  /** Its hand-over reached the batch (handOverSignal). */
  handOverSent: boolean;
  /** The batch still counts it running (until it has dealt with its result). */
  batchRunning: boolean;
  /** Its successor's id, once the successorSignal came. */
  successor?: number;
}

type Message =
  | { kind: 'freed'; to: number; from: number | 'batch'; count: number }
  | { kind: 'lent'; to: number; count: number }
  | { kind: 'successor'; to: number; successor: number };

/** An assertion cheap enough to run after every event of thousands of runs (expect is not). */
function holds(condition: boolean, what: () => string): void {
  if (!condition) throw new Error(`invariant broken: ${what()}`);
}

/** A batch of `width` stripes as batch.ts runs it: its windows, the signals between them, its lending. */
class BatchModel {
  readonly windows = new Map<number, ModelWindow>();
  readonly transit: Message[] = [];
  readonly handOvers: { window: number; inFlight: number; lent: number }[] = [];
  readonly endedStripes = new Set<number>();
  readonly lending: StripeLending;
  stopped = false;

  constructor(readonly scenario: Scenario) {
    this.lending = new StripeLending({
      concurrency: scenario.concurrency,
      width: () => scenario.width,
      newestWindow: (stripe) => Promise.resolve(this.newestWindow(stripe)),
      hasWindow: (stripe) =>
        [...this.windows.values()].some((window) => window.batchRunning && window.stripe === stripe),
      stopped: () => this.stopped,
    });
    for (let stripe = 0; stripe < scenario.width; stripe += 1) this.startWindow(stripe, { inFlight: 0, lent: 0 });
  }

  share(stripe: number): number {
    return stripeConcurrency(this.scenario.concurrency, this.scenario.width, stripe);
  }

  live(): ModelWindow[] {
    return [...this.windows.values()].filter((window) => window.mode !== 'ended');
  }

  /** A signal: refused if its receiver has ended, else handled before the receiver can end. */
  send(message: Message): boolean {
    if (this.windows.get(message.to)?.mode === 'ended') return false;
    this.transit.push(message);
    return true;
  }

  private newestWindow(stripe: number): Lendable | undefined {
    const ids = [...this.windows.values()]
      .filter((window) => window.batchRunning && window.stripe === stripe)
      .map((window) => window.id);
    if (ids.length === 0) return undefined;
    const to = Math.max(...ids);
    return {
      lend: (count) =>
        this.send({ kind: 'lent', to, count }) ? Promise.resolve() : Promise.reject(new Error('window ended')),
    };
  }

  /** batch.ts startWindow. */
  startWindow(id: number, from: { inFlight: number; lent: number }): void {
    const stripe = id % this.scenario.width;
    const lent = from.lent + this.lending.takeWaiting(stripe);
    const ledger = new WindowLedger(
      { borrowed: from.inFlight, ...(lent > 0 ? { lent } : {}) },
      { concurrency: this.share(stripe), windowCalls: this.scenario.windowCalls, parallel: 1, maxLanes: 1000 },
    );
    this.windows.set(id, {
      id,
      stripe,
      ledger,
      mode: 'running',
      ranOut: false,
      handOverSent: false,
      batchRunning: true,
    });
    const predecessor = this.windows.get(id - this.scenario.width);
    if (predecessor?.batchRunning) this.send({ kind: 'successor', to: predecessor.id, successor: id });
  }

  /** The batch's loop: the next hand-over starts a successor (borrowing nothing of a window that ended), unless stopped. */
  startSuccessor(): void {
    const handOver = this.handOvers.shift();
    if (!handOver || this.stopped) return;
    const ended = this.windows.get(handOver.window)?.mode === 'ended';
    this.startWindow(handOver.window + this.scenario.width, {
      inFlight: ended ? 0 : handOver.inFlight,
      lent: handOver.lent,
    });
  }

  deliver(index: number): void {
    const [message] = this.transit.splice(index, 1);
    const window = this.windows.get(message.to);
    if (!window) throw new Error(`a signal to window ${message.to}, which never started`);
    if (message.kind === 'freed') window.ledger.returned(message.count);
    else if (message.kind === 'lent') window.ledger.lentIn(message.count);
    else {
      window.successor = message.successor;
      window.ledger.successorRuns();
    }
  }

  /** window-slots.ts passOn. */
  passOn(window: ModelWindow): void {
    const freed = window.ledger.passFreed();
    if (window.successor !== undefined && freed > 0)
      this.send({ kind: 'freed', to: window.successor, from: window.id, count: freed });
    const lent = window.ledger.passLent();
    if (window.successor !== undefined && lent > 0 && !this.send({ kind: 'lent', to: window.successor, count: lent }))
      window.ledger.notTaken(lent);
  }

  /**
   * Whether window.ts's loop would end the window now (every signal to it handled). Its hand-over may still wait in the
   * batch: both can come to the batch in one workflow task, and then the order of their handlers is the SDK's.
   */
  canEnd(window: ModelWindow): boolean {
    if (window.mode === 'ended' || window.ledger.inFlight > 0) return false;
    if (this.transit.some((message) => message.to === window.id)) return false;
    if (window.ledger.handedOver && !window.handOverSent) return false;
    if (window.mode === 'running') return window.ranOut;
    if (window.mode === 'draining') return window.ledger.settled();
    return true;
  }

  /** The window returns; batch.ts deals with its result (then, finally). */
  async end(window: ModelWindow): Promise<void> {
    window.mode = 'ended';
    const { width } = this.scenario;
    const handedOver = window.ledger.handedOver;
    const unpassed = window.ledger.unpassed();
    const successor = handedOver ? this.windows.get(window.id + width) : undefined;
    if (successor) this.send({ kind: 'freed', to: successor.id, from: 'batch', count: Number.MAX_SAFE_INTEGER });
    if (successor && unpassed > 0) {
      if (!this.send({ kind: 'lent', to: successor.id, count: unpassed }))
        await this.lending.give(window.stripe, unpassed);
    } else if (handedOver) await this.lending.give(window.stripe, unpassed);
    else if (width > 1) {
      this.lending.stripeEnded(window.stripe, unpassed);
      this.endedStripes.add(window.stripe);
    }
    window.batchRunning = false;
    if (width > 1) await this.lending.release(window.stripe);
  }

  stop(): void {
    this.stopped = true;
    for (const window of this.live()) window.mode = 'stopping';
  }

  /** The invariant, after every event. */
  check(): void {
    const { concurrency, width } = this.scenario;
    const windows = [...this.windows.values()];
    const inFlight = windows.reduce((sum, window) => sum + window.ledger.inFlight, 0);
    // 1. Never more than the concurrency in flight, nor promised: calls out and the room windows may still start.
    holds(inFlight <= concurrency, () => `${inFlight} calls in flight, above the concurrency ${concurrency}`);
    const room = windows
      .filter((window) => window.mode === 'running')
      .reduce((sum, window) => sum + Math.max(0, window.ledger.room()), 0);
    holds(
      inFlight + room <= concurrency,
      () => `${inFlight} calls in flight and room for ${room} more, at ${concurrency}`,
    );
    // 2. A window borrowed exactly what its predecessor still holds: calls out, freed slots, and those on their way.
    for (const window of windows) {
      const predecessor = this.windows.get(window.id - width);
      if (!predecessor || predecessor.mode === 'ended' || window.mode === 'ended') continue;
      const onTheWay = this.transit.reduce(
        (sum, message) =>
          sum +
          (message.kind === 'freed' && message.to === window.id && message.from === predecessor.id ? message.count : 0),
        0,
      );
      const held = predecessor.ledger.inFlight + predecessor.ledger.freedHeld + predecessor.ledger.borrowed;
      holds(
        window.ledger.borrowed === held + onTheWay,
        () =>
          `window ${window.id} borrowed ${window.ledger.borrowed}; its predecessor holds ${held}, ${onTheWay} on the way`,
      );
    }
    // 2. Every lent call is in one place: a running stripe's share, a window, a signal or hand-over, the batch.
    if (width > 1 && !this.stopped) {
      const shares = Array.from({ length: width }, (_, stripe) => stripe)
        .filter((stripe) => !this.endedStripes.has(stripe))
        .reduce((sum, stripe) => sum + this.share(stripe), 0);
      const inWindows = this.live().reduce((sum, window) => sum + window.ledger.lentHeld, 0);
      const inSignals = this.transit.reduce((sum, message) => sum + (message.kind === 'lent' ? message.count : 0), 0);
      const inHandOvers = this.handOvers.reduce((sum, handOver) => sum + handOver.lent, 0);
      const counted = shares + inWindows + inSignals + inHandOvers + this.lending.held() + this.lending.returned;
      holds(counted === concurrency, () => `${counted} slots counted (lent ones once each), at ${concurrency}`);
    }
  }

  /** Everything runs out, in an order that always makes progress; a window that never can end is a stranded slot. */
  async drain(): Promise<void> {
    for (let round = 0; round < 10_000; round += 1) {
      let moved = false;
      while (this.transit.length > 0) {
        this.deliver(0);
        moved = true;
      }
      for (const window of this.live()) {
        if (window.ledger.inFlight > 0) window.ledger.ended(window.ledger.inFlight);
        if (window.mode === 'running' && !window.ranOut) window.ranOut = moved = true;
        if (window.ledger.handedOver && !window.handOverSent) this.completeHandOver(window);
        if (window.mode === 'draining') this.passOn(window);
      }
      while (this.handOvers.length > 0) {
        this.startSuccessor();
        moved = true;
      }
      this.check();
      const ending = this.live().find((window) => this.canEnd(window));
      if (ending) {
        await this.end(ending);
        this.check();
        moved = true;
      }
      if (!moved && this.transit.length === 0) break;
    }
    const stranded = this.live().map((window) => ({
      window: window.id,
      mode: window.mode,
      borrowed: window.ledger.borrowed,
      freed: window.ledger.freedHeld,
    }));
    expect(stranded).toEqual([]);
  }

  completeHandOver(window: ModelWindow): void {
    const next = window.ledger.handOver();
    this.handOvers.push({ window: window.id, inFlight: next.inFlight, lent: next.lent ?? 0 });
    window.handOverSent = true;
  }

  /** Once every window has ended: no call out, and (a batch that was not stopped) every slot back once. */
  checkEnded(): void {
    expect(this.live()).toEqual([]);
    expect([...this.windows.values()].reduce((sum, window) => sum + window.ledger.inFlight, 0)).toBe(0);
    if (this.scenario.width === 1) return;
    if (this.stopped)
      expect(this.lending.returned + this.lending.held()).toBeLessThanOrEqual(this.scenario.concurrency);
    else
      expect({ returned: this.lending.returned, held: this.lending.held() }).toEqual({
        returned: this.scenario.concurrency,
        held: 0,
      });
  }
}

/** The model and what the run did (a resume starts a new batch). */
interface Run {
  batch: BatchModel;
}

/** An event of the batch: `pick` chooses among the windows (or signals) it can happen to. */
abstract class BatchEvent implements fc.AsyncCommand<Run, object> {
  constructor(
    readonly pick: number,
    readonly amount: number,
  ) {}
  abstract readonly name: string;
  abstract readonly candidates: (batch: BatchModel) => ModelWindow[];
  abstract readonly apply: (batch: BatchModel, window: ModelWindow) => Promise<void> | void;
  check(run: Readonly<Run>): boolean {
    return this.candidates(run.batch).length > 0;
  }
  async run(run: Run): Promise<void> {
    const candidates = this.candidates(run.batch);
    await this.apply(run.batch, candidates[this.pick % candidates.length]);
    run.batch.check();
  }
  toString(): string {
    return `${this.name}(${this.pick}, ${this.amount})`;
  }
}

class Start extends BatchEvent {
  name = 'start';
  candidates = (batch: BatchModel) =>
    batch.live().filter((window) => window.mode === 'running' && !window.ranOut && window.ledger.room() > 0);
  apply = (_: BatchModel, window: ModelWindow) => window.ledger.started(Math.min(this.amount, window.ledger.room()));
}

class End extends BatchEvent {
  name = 'end';
  candidates = (batch: BatchModel) => batch.live().filter((window) => window.ledger.inFlight > 0);
  apply = (_: BatchModel, window: ModelWindow) => window.ledger.ended(Math.min(this.amount, window.ledger.inFlight));
}

/** A draining window runs a retry in a slot one of its calls freed. */
class Retry extends BatchEvent {
  name = 'retry';
  candidates = (batch: BatchModel) =>
    batch.live().filter((window) => window.mode === 'draining' && window.ledger.freedHeld > 0);
  apply = (_: BatchModel, window: ModelWindow) => {
    if (window.ledger.takeFreed()) window.ledger.started(1);
  };
}

class RunOut extends BatchEvent {
  name = 'run-out';
  candidates = (batch: BatchModel) => batch.live().filter((window) => window.mode === 'running' && !window.ranOut);
  apply = (_: BatchModel, window: ModelWindow) => {
    window.ranOut = true;
  };
}

/** window.ts handOver: it stops starting calls, then (lanes may end between) computes and signals the hand-over. */
class BeginHandOver extends BatchEvent {
  name = 'hand-over';
  candidates = (batch: BatchModel) => batch.live().filter((window) => window.mode === 'running');
  apply = (_: BatchModel, window: ModelWindow) => {
    window.mode = 'draining';
    window.ledger.handingOver();
  };
}

class CompleteHandOver extends BatchEvent {
  name = 'hand-over-sent';
  candidates = (batch: BatchModel) => batch.live().filter((window) => window.ledger.handedOver && !window.handOverSent);
  apply = (batch: BatchModel, window: ModelWindow) => batch.completeHandOver(window);
}

class StartSuccessor extends BatchEvent {
  name = 'start-successor';
  candidates = (batch: BatchModel) => (batch.handOvers.length > 0 ? batch.live().slice(0, 1) : []);
  apply = (batch: BatchModel) => batch.startSuccessor();
}

/** A signal arrives; signals to a window arrive in any order. */
class Deliver extends BatchEvent {
  name = 'deliver';
  candidates = (batch: BatchModel) => (batch.transit.length > 0 ? batch.live().slice(0, 1) : []);
  apply = (batch: BatchModel) => batch.deliver(this.pick % batch.transit.length);
}

class PassOn extends BatchEvent {
  name = 'pass-on';
  candidates = (batch: BatchModel) =>
    batch.live().filter((window) => window.mode === 'draining' && window.successor !== undefined);
  apply = (batch: BatchModel, window: ModelWindow) => batch.passOn(window);
}

/** A window returns: the batch passes on its slots, or lends its stripe's share to the stripes still running. */
class EndWindow extends BatchEvent {
  name = 'window-ends';
  candidates = (batch: BatchModel) => batch.live().filter((window) => batch.canEnd(window));
  apply = (batch: BatchModel, window: ModelWindow) => batch.end(window);
}

/** Cancel, fail-fast or budget: every window stops, nothing more is lent. */
class Stop extends BatchEvent {
  name = 'stop';
  candidates = (batch: BatchModel) => (batch.stopped ? [] : batch.live().slice(0, 1));
  apply = (batch: BatchModel) => batch.stop();
}

/** Once the stopped batch has ended, a resume runs a new batch with the same concurrency. */
class Resume extends BatchEvent {
  name = 'resume';
  candidates = (batch: BatchModel) =>
    batch.stopped && batch.live().length === 0 && batch.transit.length === 0 && batch.handOvers.length === 0
      ? [...batch.windows.values()].slice(0, 1)
      : [];
  apply = () => undefined;
  override async run(run: Run): Promise<void> {
    run.batch.checkEnded();
    run.batch = new BatchModel(run.batch.scenario);
    run.batch.check();
    return Promise.resolve();
  }
}

const event = (Event: new (pick: number, amount: number) => BatchEvent, weight: number) => ({
  weight,
  arbitrary: fc.tuple(fc.nat(50), fc.integer({ min: 1, max: 4 })).map(([pick, amount]) => new Event(pick, amount)),
});

// Weighted so that most runs go deep (stripes end and lend, windows hand over more than once) before a stop, if any.
const events = fc.commands(
  [
    fc.oneof(
      event(Start, 6),
      event(End, 6),
      event(Retry, 2),
      event(RunOut, 1),
      event(BeginHandOver, 4),
      event(CompleteHandOver, 4),
      event(StartSuccessor, 4),
      event(Deliver, 6),
      event(PassOn, 3),
      event(EndWindow, 4),
      event(Stop, 1),
      event(Resume, 2),
    ),
  ],
  { maxCommands: 100, size: 'max' },
);

// One stripe in a sixth of the runs: lending needs two or more.
const scenarios: fc.Arbitrary<Scenario> = fc.constantFrom(1, 2, 2, 3, 3, 4).chain((width) =>
  fc.record({
    width: fc.constant(width),
    concurrency: fc.integer({ min: width, max: 24 }),
    windowCalls: fc.integer({ min: 1, max: 16 }),
  }),
);

describe('the slot ledger', () => {
  test.prop([scenarios, events], { seed: SEED, numRuns: RUNS })(
    'never has more than the concurrency in flight and gives every slot back once, in any order of events',
    async (scenario, commands) => {
      const run: Run = { batch: new BatchModel(scenario) };
      await fc.asyncModelRun(() => ({ model: run, real: {} }), commands);
      await run.batch.drain();
      run.batch.checkEnded();
    },
  );

  test('gives its successor a slot that comes back while it hands over once, not twice', () => {
    const shape = { concurrency: 4, windowCalls: 200, parallel: 1, maxLanes: 1000 };
    const window = new WindowLedger({ borrowed: 0 }, shape);
    window.started(4);
    window.handingOver();
    window.ended(1);
    const successor = new WindowLedger({ borrowed: window.handOver().inFlight }, shape);
    expect(successor.room()).toBe(1);
    window.successorRuns();
    window.ended(3);
    successor.returned(window.passFreed());
    expect(successor.room()).toBe(4);
    expect(window.passFreed()).toBe(0);
  });
});
