import { getEventListeners } from 'node:events';
import { CallSignal } from '../src/llm/abort-signals';
import { KeyPacer } from '../src/pacing/key-pacer';

const turns = async (count: number) => {
  for (let turn = 0; turn < count; turn += 1) await new Promise((resolve) => setImmediate(resolve));
};

const listenerCount = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

describe("a model call's one signal", () => {
  it('sees a source abort at once and passes it to the signal two event-loop turns later, with its reason', async () => {
    const source = new AbortController();
    const call = new CallSignal([source.signal, undefined]);
    const reason = new Error('cancelled');
    source.abort(reason);
    expect(call.cancelled()).toEqual({ reason });
    expect(call.signal.aborted).toBe(false);
    await turns(2);
    expect(call.signal.aborted).toBe(true);
    expect(call.signal.reason).toBe(reason);
    expect(call.timedOut()).toBe(false);
    call.clear();
  });

  it('is aborted at once when a source already was, and keeps the first reason', () => {
    const first = new AbortController();
    first.abort('first');
    const call = new CallSignal([first.signal, new AbortController().signal]);
    call.abort('watchdog');
    expect(call.signal.aborted).toBe(true);
    expect(call.signal.reason).toBe('first');
    expect(call.cancelled()).toEqual({ reason: 'first' });
  });

  it('aborts with a TimeoutError at the deadline, not once the deadline is stopped, and unhooks its sources', async () => {
    const source = new AbortController();
    const stopped = new CallSignal([source.signal]);
    stopped.startDeadline(5);
    stopped.stopDeadline();
    const timed = new CallSignal([source.signal]);
    expect(listenerCount(source.signal)).toBe(2);
    timed.startDeadline(5);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(stopped.signal.aborted).toBe(false);
    expect(timed.signal.aborted).toBe(true);
    expect((timed.signal.reason as DOMException).name).toBe('TimeoutError');
    expect(timed.timedOut()).toBe(true);
    expect(timed.cancelled()).toBeUndefined();
    stopped.clear();
    timed.clear();
    expect(listenerCount(source.signal)).toBe(0);
  });
});

describe("the pacer's admission without a wait", () => {
  const pacer = () =>
    new KeyPacer(
      { provider: 'p', model: 'm', keyId: 'k' },
      { probeConcurrency: 2, maxConcurrency: 2, headroom: 0.1, now: Date.now },
    );

  it('admits while a slot is free and nobody waits, as acquire would at once', async () => {
    const keyPacer = pacer();
    const first = keyPacer.admitIfFree(10);
    const second = keyPacer.admitIfFree(10);
    expect(first).toBeDefined();
    expect(second).toBeDefined();
    expect(keyPacer.admitIfFree(10)).toBeUndefined();
    const waiting = keyPacer.acquire(10, new AbortController().signal);
    first?.release({ kind: 'answered', headers: new Headers(), usedTokens: 10 });
    // The freed slot goes to the one queued, not to a newcomer.
    expect(keyPacer.admitIfFree(10)).toBeUndefined();
    await expect(waiting).resolves.toBeDefined();
  });
});
