import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { semiSpaceArguments } from '../src/cli/heap-cap';

/**
 * `fanout worker`'s re-launched child gives the workflow threads (which hold the cached workflows) a heap cap sized for
 * the cache, while its own thread keeps FANOUT_WORKER_HEAP_MB: V8 reads the flag when an isolate is made.
 */
const HEAP_CAP = path.resolve(__dirname, '..', 'src', 'cli', 'heap-cap.ts');

function limits(
  cachedWorkflows: number,
  marker: string,
  nodeArguments: string[] = [],
  launcherSizedYoungGeneration = false,
): { main: number; thread: number; cap: number | null } {
  const script = `
    const v8 = require('node:v8');
    const { Worker } = require('node:worker_threads');
    const { capWorkflowThreads } = require(${JSON.stringify(HEAP_CAP)});
    const cap = capWorkflowThreads(${cachedWorkflows}) ?? null;
    const main = v8.getHeapStatistics().heap_size_limit / 1048576;
    const thread = new Worker("require('node:worker_threads').parentPort.postMessage(require('node:v8').getHeapStatistics().heap_size_limit / 1048576)", { eval: true });
    thread.once('message', (limit) => { console.log(JSON.stringify({ main, thread: limit, cap })); thread.terminate(); });
  `;
  const output = execFileSync(
    process.execPath,
    ['--max-old-space-size=128', ...nodeArguments, '--require', require.resolve('tsx/cjs'), '-e', script],
    {
      env: {
        ...process.env,
        FANOUT_HEAP_CAPPED: marker,
        FANOUT_HEAP_SEMI_SPACE: launcherSizedYoungGeneration ? '1' : '',
      },
      encoding: 'utf8',
    },
  );
  return JSON.parse(output.trim().split('\n').pop() as string) as { main: number; thread: number; cap: number | null };
}

it("gives the workflow threads half the cap plus 1 MB per cached workflow, and keeps the worker thread's cap", () => {
  const capped = limits(250, '1', [], true);
  expect(capped.cap).toBe(64 + 250);
  // heap_size_limit adds the young generation (three semi-spaces: 2 MB in the threads, Node's 16 MB here) to the old
  // space's cap.
  expect(capped.thread).toBe(64 + 250 + 3 * 2);
  expect(capped.main).toBe(128 + 3 * 16);
  expect(capped.main).toBeLessThan(128 + 64);
});

it('changes nothing outside the re-launched child', () => {
  const uncapped = limits(250, '');
  expect(uncapped.cap).toBeNull();
  expect(Math.abs(uncapped.thread - uncapped.main)).toBeLessThan(16);
});

it("sizes the child's young generation unless the user chose one", () => {
  expect(semiSpaceArguments({}, [])).toEqual(['--max-semi-space-size=8']);
  expect(semiSpaceArguments({}, ['--max-semi-space-size=32'])).toEqual([]);
  expect(semiSpaceArguments({ NODE_OPTIONS: '--inspect --min_semi_space_size=2' }, [])).toEqual([]);
});

it("gives the workflow threads 2 MB semi-spaces where the young generation's size is the launcher's, not the user's", () => {
  // heap_size_limit is the old space's cap plus three semi-spaces (two of new space, one of new large objects).
  const launchers = limits(250, '1', semiSpaceArguments({}, []), true);
  expect(launchers.thread).toBe(64 + 250 + 3 * 2);
  expect(launchers.main).toBe(128 + 3 * 8);
  const users = limits(250, '1', ['--max-semi-space-size=4']);
  expect(users.thread).toBe(64 + 250 + 3 * 4);
  // The user's flag of the very value the launcher would give (the launcher then gives none, nor its marker).
  expect(semiSpaceArguments({}, ['--max-semi-space-size=8'])).toEqual([]);
  const usersEight = limits(250, '1', ['--max-semi-space-size=8']);
  expect(usersEight.thread).toBe(64 + 250 + 3 * 8);
  // Nobody sized it: V8's own 16 MB.
  const unsized = limits(250, '1', []);
  expect(unsized.thread).toBe(64 + 250 + 3 * 16);
});
