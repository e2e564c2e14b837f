import { chmodSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { AnswerCache, entryLocation } from '../src/answer-cache/answer-cache';
import { canonicalJson } from '../src/answer-cache/canonical-json';
import { requestKey } from '../src/answer-cache/request-key';
import { withCallCost } from '../src/answer-cache/call-cost';
import { formatCost } from '../src/cli/report';
import { resolveCacheSettings } from '../src/client/cache-settings';
import type { AnswerCacheSettings } from '../src/contract/answer-cache';
import { InvalidInputError } from '../src/contract/validation';
import { FileStorage } from '../src/store';

const directory = mkdtempSync(path.join(os.tmpdir(), 'fanout-answer-cache-'));
const storage = new FileStorage();
const call = { taskId: 't1', label: 'agent "t1"' };

function cacheAt(name: string, now = () => Date.now()) {
  const warnings: string[] = [];
  const cache = new AnswerCache({
    storage,
    storeRoot: path.join(directory, name),
    now,
    warn: (message) => warnings.push(message),
  });
  return { cache, warnings, location: path.join(directory, name, 'cache') };
}

/** A `send` that counts its calls and answers `answer-<n>` after `ms`. */
function counted(ms = 0) {
  const sender = {
    calls: 0,
    send: async () => {
      sender.calls += 1;
      const n = sender.calls;
      await new Promise((resolve) => setTimeout(resolve, ms));
      return { text: `answer-${n}` };
    },
  };
  return sender;
}

const request = {
  baseUrl: 'https://api.example.com/v1',
  api: 'chat',
  params: { model: 'm', messages: [{ role: 'user', content: 'hi' }], temperature: 0 },
};

describe('the request key', () => {
  it('is the same for the same request whatever the order of its keys', () => {
    const reordered = {
      baseUrl: 'https://api.example.com/v1/',
      api: 'chat',
      params: { temperature: 0, messages: [{ content: 'hi', role: 'user' }], model: 'm' },
    };
    expect(requestKey(reordered)).toBe(requestKey(request));
    expect(canonicalJson({ b: 1, a: { d: [2, { f: 1, e: 0 }], c: undefined } })).toBe(
      '{"a":{"d":[2,{"e":0,"f":1}]},"b":1}',
    );
  });

  it('differs when anything that decides the answer differs, and not for the service tier', () => {
    const key = requestKey(request);
    const changed = (params: object, other: Partial<typeof request> = {}) =>
      requestKey({ ...request, ...other, params: { ...request.params, ...params } });
    expect(changed({ temperature: 0.5 })).not.toBe(key);
    expect(changed({ max_tokens: 10 })).not.toBe(key);
    expect(changed({ stop: ['\n'] })).not.toBe(key);
    expect(changed({ tools: [] })).not.toBe(key);
    expect(changed({ tool_choice: 'auto' })).not.toBe(key);
    expect(changed({ response_format: { type: 'json_object' } })).not.toBe(key);
    expect(changed({ model: 'n' })).not.toBe(key);
    expect(changed({}, { api: 'responses' })).not.toBe(key);
    expect(changed({}, { baseUrl: 'https://other.example.com/v1' })).not.toBe(key);
    expect(changed({ service_tier: 'flex' })).toBe(key);
    expect(key).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('the answer cache', () => {
  it('answers a request it stored without sending it again (read-write)', async () => {
    const { cache, location } = cacheAt('read-write');
    const settings: AnswerCacheSettings = { mode: 'read-write', location };
    const sender = counted();
    const first = await cache.through(settings, 'a'.repeat(64), call, sender.send);
    const second = await cache.through(settings, 'a'.repeat(64), call, sender.send);
    expect(first).toEqual({ value: { text: 'answer-1' }, cached: false });
    expect(second).toEqual({ value: { text: 'answer-1' }, cached: true });
    expect(sender.calls).toBe(1);
  });

  it('reads but never writes under read-only, and sends every call with the cache off', async () => {
    const { cache, location } = cacheAt('read-only');
    const sender = counted();
    await cache.through({ mode: 'read-only', location }, 'b'.repeat(64), call, sender.send);
    await cache.through({ mode: 'read-only', location }, 'b'.repeat(64), call, sender.send);
    expect(sender.calls).toBe(2);
    expect(readdirSync(directory)).not.toContain('read-only');
    await cache.through({ mode: 'read-write', location }, 'b'.repeat(64), call, sender.send);
    const hit = await cache.through({ mode: 'read-only', location }, 'b'.repeat(64), call, sender.send);
    expect(hit).toEqual({ value: { text: 'answer-3' }, cached: true });
    await cache.through({ mode: 'off', location }, 'b'.repeat(64), call, sender.send);
    await cache.through(undefined, 'b'.repeat(64), call, sender.send);
    expect(sender.calls).toBe(5);
  });

  it('fails a miss at once under replay, naming the task and the hash, never retried', async () => {
    const { cache, location } = cacheAt('replay');
    const sender = counted();
    const key = 'c'.repeat(64);
    const miss = await cache.through({ mode: 'replay', location }, key, call, sender.send).catch((error) => error);
    expect(miss).toBeInstanceOf(ApplicationFailure);
    expect(miss).toMatchObject({ type: 'CacheMiss', nonRetryable: true });
    expect(miss.message).toContain('agent "t1"');
    expect(miss.message).toContain(key);
    expect(sender.calls).toBe(0);
    await cache.through({ mode: 'read-write', location }, key, call, sender.send);
    expect(await cache.through({ mode: 'replay', location }, key, call, sender.send)).toEqual({
      value: { text: 'answer-1' },
      cached: true,
    });
  });

  it('sends identical requests in flight at once on one worker once', async () => {
    const { cache, location } = cacheAt('in-flight');
    const sender = counted(100);
    const settings: AnswerCacheSettings = { mode: 'read-write', location };
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, () => cache.through(settings, 'd'.repeat(64), call, sender.send)),
    );
    expect(sender.calls).toBe(1);
    expect(outcomes.map((outcome) => outcome.cached).sort()).toEqual([false, true, true, true, true]);
    expect(new Set(outcomes.map((outcome) => JSON.stringify(outcome.value))).size).toBe(1);
  });

  it('lets a twin send for itself when the request it waited on failed', async () => {
    const { cache, location } = cacheAt('twin-failed');
    const settings: AnswerCacheSettings = { mode: 'read-write', location };
    let calls = 0;
    const failing = async () => {
      calls += 1;
      await new Promise((resolve) => setTimeout(resolve, 50));
      throw new Error('connection reset');
    };
    const sender = counted();
    const [first, second] = await Promise.allSettled([
      cache.through(settings, 'e'.repeat(64), call, failing),
      cache.through(settings, 'e'.repeat(64), call, sender.send),
    ]);
    expect(first.status).toBe('rejected');
    expect(second).toEqual({ status: 'fulfilled', value: { value: { text: 'answer-1' }, cached: false } });
    expect(calls + sender.calls).toBe(2);
  });

  it('stops a call waiting on an identical one in flight as soon as its own signal aborts', async () => {
    const { cache, location } = cacheAt('twin-cancelled');
    const settings: AnswerCacheSettings = { mode: 'read-write', location };
    const sender = counted(2000);
    const leader = cache.through(settings, '2'.repeat(64), call, sender.send);
    const abort = new AbortController();
    const waiting = cache.through(settings, '2'.repeat(64), { ...call, signals: [abort.signal] }, sender.send);
    const startedAt = Date.now();
    setTimeout(() => abort.abort(new Error('cancelled')), 50);
    await expect(waiting).rejects.toThrow('cancelled');
    expect(Date.now() - startedAt).toBeLessThan(1000);
    expect(await leader).toEqual({ value: { text: 'answer-1' }, cached: false });
    expect(sender.calls).toBe(1);
  });

  it('treats a corrupted entry as a miss with a warning, never as an answer (a byte flipped)', async () => {
    const { cache, location, warnings } = cacheAt('corrupt');
    const settings: AnswerCacheSettings = { mode: 'read-write', location };
    const key = 'f'.repeat(64);
    const sender = counted();
    await cache.through(settings, key, call, sender.send);
    const file = entryLocation(location, key);
    const bytes = readFileSync(file);
    const at = bytes.indexOf('answer-1') + 'answer-'.length;
    bytes[at] = '7'.charCodeAt(0); // still JSON, now says answer-7: only the digest tells
    writeFileSync(file, bytes);
    const again = await cache.through(settings, key, call, sender.send);
    expect(again).toEqual({ value: { text: 'answer-2' }, cached: false });
    expect(warnings.join('\n')).toContain('does not match its digest');
    // The miss wrote a good entry over it.
    expect(await cache.through(settings, key, call, sender.send)).toEqual({
      value: { text: 'answer-2' },
      cached: true,
    });
    writeFileSync(file, readFileSync(file).subarray(0, 40)); // cut short
    const replayed = await cache.through({ mode: 'replay', location }, key, call, sender.send).catch((error) => error);
    expect(replayed).toMatchObject({ type: 'CacheMiss' });
    expect(replayed.message).toContain('is not JSON');
    expect(sender.calls).toBe(2);
  });

  it('takes an entry older than its TTL for a miss, except under replay', async () => {
    let now = 1_000_000;
    const { cache, location } = cacheAt('ttl', () => now);
    const key = '1'.repeat(64);
    const sender = counted();
    await cache.through({ mode: 'read-write', location, ttlMs: 1000 }, key, call, sender.send);
    now += 999;
    expect((await cache.through({ mode: 'read-write', location, ttlMs: 1000 }, key, call, sender.send)).cached).toBe(
      true,
    );
    now += 2;
    expect((await cache.through({ mode: 'read-only', location, ttlMs: 1000 }, key, call, sender.send)).cached).toBe(
      false,
    );
    expect((await cache.through({ mode: 'replay', location, ttlMs: 1000 }, key, call, sender.send)).cached).toBe(true);
    expect(sender.calls).toBe(2);
  });

  it('prices a cached answer at $0 and reports what it saved, with no tokens to count', () => {
    const table = { m: { inputPerMillion: 1, outputPerMillion: 2 } };
    const usage = { promptTokens: 1000, completionTokens: 500, totalTokens: 1500 };
    expect(withCallCost({ model: 'm', usage }, table)).toEqual({ model: 'm', usage, costUsd: 0.002 });
    expect(withCallCost({ model: 'm', usage, cached: true }, table)).toEqual({
      model: 'm',
      cached: true,
      costUsd: 0,
      savedUsd: 0.002,
    });
  });
});

describe('the report of a run with cached answers', () => {
  it('says how many calls the cache answered and what they saved, and nothing when none', () => {
    expect(formatCost({ usd: 0.0001, unpricedCalls: 0 })).toBe('$0.000100');
    expect(formatCost({ usd: 0.0001, unpricedCalls: 0, cachedCalls: 3, savedUsd: 0.002 })).toBe(
      '$0.000100; 3 answered from the answer cache ($0.002000 saved)',
    );
    expect(formatCost({ usd: 0, unpricedCalls: 1, cachedCalls: 1, savedUsd: 0 })).toBe(
      'unknown (1 unpriced call); 1 answered from the answer cache ($0.000000 saved)',
    );
  });
});

describe('the cache settings of a run', () => {
  const store = { storage, root: path.join(directory, 'store') };

  it('is off unless the run or FANOUT_CACHE turns it on', async () => {
    expect(await resolveCacheSettings(undefined, store, {})).toBeUndefined();
    expect(await resolveCacheSettings({ mode: 'off' }, store, { FANOUT_CACHE: 'read-write' })).toBeUndefined();
    expect(await resolveCacheSettings(undefined, store, { FANOUT_CACHE: 'read-only', FANOUT_CACHE_TTL: '7d' })).toEqual(
      { mode: 'read-only', location: path.join(directory, 'store', 'answer-cache'), ttlMs: 7 * 86_400_000 },
    );
  });

  it('refuses replay without a cache location, naming what to set', async () => {
    const refused = await resolveCacheSettings({ mode: 'replay' }, store, {}).catch((error) => error);
    expect(refused).toBeInstanceOf(InvalidInputError);
    expect(refused.message).toContain('FANOUT_CACHE_STORE');
    expect(await resolveCacheSettings({ mode: 'replay' }, store, { FANOUT_CACHE_STORE: directory })).toEqual({
      mode: 'replay',
      location: directory,
    });
  });

  it('refuses a location read-write cannot write, and a bad FANOUT_CACHE', async () => {
    const file = path.join(directory, 'a-file');
    writeFileSync(file, 'x');
    const underFile = await resolveCacheSettings({ mode: 'read-write', location: file }, store, {}).catch((e) => e);
    expect(underFile).toBeInstanceOf(InvalidInputError);
    expect(underFile.message).toContain('cannot be written');
    const locked = path.join(directory, 'locked');
    await storage.write(path.join(locked, 'x'), 'x');
    chmodSync(locked, 0o500);
    try {
      if (process.getuid?.() !== 0) {
        const refused = await resolveCacheSettings({ mode: 'read-write', location: locked }, store, {}).catch((e) => e);
        expect(refused).toBeInstanceOf(InvalidInputError);
      }
      // read-only never writes, so it does not need to.
      expect(await resolveCacheSettings({ mode: 'read-only', location: locked }, store, {})).toEqual({
        mode: 'read-only',
        location: locked,
      });
    } finally {
      chmodSync(locked, 0o700);
    }
    const bad = await resolveCacheSettings(undefined, store, { FANOUT_CACHE: 'sometimes' }).catch((e) => e);
    expect(bad.message).toContain('FANOUT_CACHE must be one of read-write, read-only, replay, off');
  });
});
