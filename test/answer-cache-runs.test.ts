import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { AnswerCacheSettings, CacheMode } from '../src/contract/answer-cache';
import type { AgentTask } from '../src/contract/agent-task';
import { batchDirectory, readSink, writeTasks } from './support/batch-files';
import { useTestStack } from './support/suite-stack';
import { uniqueName } from './support/test-stack';

const directory = batchDirectory();

const suite = useTestStack({ simulator: { latency: { minMs: 20, maxMs: 60 } } });

function requestsOf(workflowId: string) {
  return suite.servers.simulator.log().filter((request) => request.workflowId === workflowId);
}

/** The cache settings of a test: its own location, so tests do not answer each other. */
function cacheIn(name: string, mode: CacheMode = 'read-write'): AnswerCacheSettings {
  return { mode, location: path.join(directory, `cache-${name}`) };
}

function entryFiles(location: string): string[] {
  return readdirSync(location, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.json'))
    .map((name) => path.join(location, name));
}

async function run(tasks: AgentTask[], cache: AnswerCacheSettings) {
  const handle = await suite.stack.client.startParallel(tasks, { cache }, { workflowId: uniqueName('cached-run') });
  return { workflowId: handle.workflowId, result: await handle.result() };
}

describe('the answer cache across runs', () => {
  it('re-runs a batch with 3 of 60 prompts edited: the provider sees exactly the edited items', async () => {
    const cache = cacheIn('batch');
    const edited = new Set([5, 17, 42]);
    const source = writeTasks(directory, 60, (index) => `question ${index}`, 'first');
    const firstSink = path.join(directory, 'first.jsonl');
    const first = await suite.stack.client.startBatch({ source, sink: firstSink, options: { concurrency: 10, cache } });
    const firstSummary = await first.result();
    expect(firstSummary).toMatchObject({ total: 60, succeeded: 60 });
    expect(requestsOf(first.batchId)).toHaveLength(60);
    expect(firstSummary.cost?.cachedCalls).toBeUndefined();

    // The same ids, three prompts changed: an everyday re-run after editing a handful of items.
    const elsewhere = batchDirectory();
    const again = writeTasks(
      elsewhere,
      60,
      (index) => (edited.has(index) ? `question ${index}, edited` : `question ${index}`),
      'first',
    );
    const secondSink = path.join(elsewhere, 'second.jsonl');
    const second = await suite.stack.client.startBatch({
      source: again,
      sink: secondSink,
      options: { concurrency: 10, cache },
    });
    const summary = await second.result();
    expect(summary).toMatchObject({ total: 60, succeeded: 60 });
    const sent = requestsOf(second.batchId);
    expect(sent.map((request) => request.taskId).sort()).toEqual(['first-17', 'first-42', 'first-5']);

    const before = new Map(readSink(firstSink).map((line) => [line.id, line]));
    const lines = readSink(secondSink);
    const cached = lines.filter((line) => line.cached);
    expect(cached).toHaveLength(57);
    for (const line of cached) {
      expect(line.costUsd).toBe(0);
      expect(line.usage).toBeUndefined();
      expect(line.output).toBe(before.get(line.id)?.output);
      expect(line.savedUsd).toBe(before.get(line.id)?.costUsd);
    }
    for (const line of lines.filter((line) => !line.cached)) expect(line.output).toContain(', edited');
    const savedUsd = cached.reduce((sum, line) => sum + (before.get(line.id)?.costUsd ?? 0), 0);
    expect(summary.cost?.cachedCalls).toBe(57);
    expect(summary.cost?.savedUsd).toBeCloseTo(savedUsd, 9);
    const editedCost = lines.filter((line) => !line.cached).reduce((sum, line) => sum + (line.costUsd ?? 0), 0);
    expect(summary.cost?.usd).toBeCloseTo(editedCost, 9);
  });

  it('replays a recorded run without a request, and fails an unrecorded task CacheMiss naming it and the hash', async () => {
    const recorded: AgentTask[] = [
      { id: 'plan', prompt: 'make a plan' },
      { id: 'review', prompt: 'review the plan' },
    ];
    const recording = await run(recorded, cacheIn('replay'));
    expect(recording.result.metrics.succeeded).toBe(2);
    expect(requestsOf(recording.workflowId)).toHaveLength(2);

    const replay = await run([...recorded, { id: 'extra', prompt: 'never recorded' }], cacheIn('replay', 'replay'));
    expect(requestsOf(replay.workflowId)).toHaveLength(0);
    const [plan, review, extra] = replay.result.results;
    expect(plan).toMatchObject({ status: 'ok', cached: true, costUsd: 0, attempts: 1 });
    expect(plan.output).toBe(recording.result.results[0].output);
    expect(review).toMatchObject({ status: 'ok', cached: true });
    expect(extra).toMatchObject({ status: 'failed', attempts: 1, error: { type: 'CacheMiss' } });
    expect(extra.error?.message).toContain('agent "extra"');
    expect(extra.error?.message).toMatch(/request [0-9a-f]{64}/);
    expect(replay.result.metrics.cost).toMatchObject({ usd: 0, cachedCalls: 2 });
    expect(replay.result.metrics.cost.savedUsd).toBeCloseTo(
      (recording.result.results[0].costUsd ?? 0) + (recording.result.results[1].costUsd ?? 0),
      9,
    );
  });

  it('sends identical requests in flight at once on one worker once', async () => {
    const tasks = Array.from({ length: 6 }, (_, index) => ({ id: `twin-${index}`, prompt: 'same [sim latency=800]' }));
    const { workflowId, result } = await run(tasks, cacheIn('twins'));
    expect(result.metrics.succeeded).toBe(6);
    expect(requestsOf(workflowId)).toHaveLength(1);
    expect(result.results.filter((entry) => entry.cached)).toHaveLength(5);
    expect(new Set(result.results.map((entry) => entry.output)).size).toBe(1);
  });

  it('takes an entry with a byte flipped for a miss: the request is sent again and the answer is the right one', async () => {
    const cache = cacheIn('corrupt');
    const task = { id: 'fragile', prompt: 'an answer worth keeping' };
    const first = await run([task], cache);
    const [entry] = entryFiles(cache.location as string);
    const bytes = readFileSync(entry);
    const at = bytes.indexOf('worth keeping');
    expect(at).toBeGreaterThan(0);
    bytes[at] = 'W'.charCodeAt(0);
    writeFileSync(entry, bytes);
    const second = await run([task], cache);
    expect(requestsOf(second.workflowId)).toHaveLength(1);
    expect(second.result.results[0]).toMatchObject({ status: 'ok', output: first.result.results[0].output });
    expect(second.result.results[0].cached).toBeUndefined();
    // Written again whole: the next run is answered from it.
    const third = await run([task], cache);
    expect(requestsOf(third.workflowId)).toHaveLength(0);
    expect(third.result.results[0]).toMatchObject({ cached: true, output: first.result.results[0].output });
  });
});
