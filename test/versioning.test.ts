import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import { createLlmClient } from '../src/llm/llm-client';
import { FanoutClient } from '../src/client/fanout-client';
import { createFanoutWorker } from '../src/worker';
import { batchDirectory, sinkCounts, writeTasks } from './support/batch-files';
import { decodePayload } from './support/history';
import { ROOT } from './support/paths';
import { useTestServers } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

/**
 * A deploy while a batch is in flight: the batch starts on the workflow code from before the `window-progress-memo` patch,
 * its worker stops half-way, and a worker with the current code replays the window's history and finishes it.
 * CONTRIBUTING.md, "Changing workflow code".
 */
/** The last commit of src/workflows/batch/window.ts before the patch; delete this test when the patch is deprecated. */
const BEFORE_PATCH = '17b26d7e5fafbd04c463978a92811e36ebc09bf1';
const PATCH_ID = 'window-progress-memo';
const NONDETERMINISM = temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR;

const suite = useTestServers({ simulator: { latency: { minMs: 200, maxMs: 300 } } });
let scratch: string;
let oldBundle: string;

/** The workflow bundle of src/ as it was at `commit`, built from a `git archive` of it beside this checkout's node_modules. */
async function bundleAt(commit: string): Promise<string> {
  const archive = path.join(scratch, 'src.tar');
  try {
    execFileSync('git', ['-C', ROOT, 'archive', '--output', archive, commit, 'src'], { stdio: 'pipe' });
  } catch (error) {
    throw new Error(
      `the workflow code from before the patch (commit ${commit}) is not in this clone; fetch the full history ` +
        `(git fetch --unshallow; fetch-depth: 0 in CI): ${String((error as { stderr?: Buffer }).stderr ?? error)}`,
    );
  }
  execFileSync('tar', ['-xf', archive, '-C', scratch]);
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(scratch, 'node_modules'));
  const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error };
  const { code } = await bundleWorkflowCode({
    workflowsPath: path.join(scratch, 'src', 'workflows', 'index.ts'),
    logger: quiet,
  });
  const file = path.join(scratch, 'workflow-bundle.old.js');
  writeFileSync(file, code);
  return file;
}

/** The id of the patch a marker event records (the SDK's `core_patch` marker), if it is one. */
function patchIdOf(event: temporal.api.history.v1.IHistoryEvent): string | undefined {
  const attributes = event.markerRecordedEventAttributes;
  if (attributes?.markerName !== 'core_patch') return undefined;
  return (decodePayload(attributes.details?.['patch-data']?.payloads?.[0]) as { id?: string } | undefined)?.id;
}

/** A worker in this process on `taskQueue` running the workflow bundle at `bundle`. */
async function startWorker(taskQueue: string, bundle: string, identity: string): Promise<{ stop(): Promise<void> }> {
  const worker = await createFanoutWorker({
    connection: suite.servers.server.nativeConnection,
    taskQueue,
    identity,
    workflowBundlePath: bundle,
    heartbeatThrottleMs: 300,
    shutdownGraceMs: 5_000,
    activities: { llm: createLlmClient({ baseURL: suite.servers.simulator.baseUrl, apiKey: 'test-key' }) },
  });
  const running = worker.run();
  return {
    stop: async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
    },
  };
}

beforeAll(async () => {
  scratch = mkdtempSync(path.join(tmpdir(), 'fanout-versioning-'));
  oldBundle = await bundleAt(BEFORE_PATCH);
});

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

describe('deploying a patched batch window workflow while a batch runs', () => {
  it('finishes a batch started on the old code on a worker with the new code, every id once in the sink', async () => {
    const newBundle = process.env.FANOUT_WORKFLOW_BUNDLE;
    if (!newBundle)
      throw new Error('FANOUT_WORKFLOW_BUNDLE is not set (test/support/global-setup.ts sets it after `npm run build`)');
    const taskQueue = uniqueName('tq');
    const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
    const directory = batchDirectory();
    const source = writeTasks(directory, 40, (index) => `item ${index}`, 'deploy');
    const sink = path.join(directory, 'deploy.out.jsonl');

    const oldWorker = await startWorker(taskQueue, oldBundle, 'old-code');
    let newWorker: { stop(): Promise<void> } | undefined;
    try {
      const handle = await client.startBatch({ source, sink, options: { concurrency: 4, pageSize: 10 } });
      await waitFor(
        'the old worker to finish about a third of the batch',
        async () => (await handle.progress()).done >= 12,
      );
      await oldWorker.stop();
      // No worker answers queries now: the simulator says how far the old worker got.
      const answered = () =>
        suite.servers.simulator
          .log()
          .filter((request) => request.workflowId === handle.batchId && request.respondedAt !== undefined);
      expect(answered().length).toBeGreaterThanOrEqual(12);
      expect(answered().length).toBeLessThan(40);
      // The batch's window is the workflow the patch changes.
      const windowId = ((await handle.workflow.fetchHistory()).events ?? []).flatMap(
        (event) => event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId ?? [],
      )[0];
      const window = suite.servers.server.client.workflow.getHandle(windowId);
      // The old code does not know the patch: nothing of it in the window so far.
      expect((await window.describe()).memo?.progress).toBeUndefined();

      newWorker = await startWorker(taskQueue, newBundle, 'new-code');
      // A run the new code cannot replay does not fail: its workflow task fails and is retried forever. So watch for that.
      const end = await waitFor(
        'the batch to finish on the new worker',
        async () => {
          const events = (await window.fetchHistory()).events ?? [];
          const taskFailure = events.find((event) => event.workflowTaskFailedEventAttributes?.cause === NONDETERMINISM)
            ?.workflowTaskFailedEventAttributes?.failure?.message;
          if (taskFailure) return { taskFailure };
          return events.some((event) => event.workflowExecutionCompletedEventAttributes)
            ? { taskFailure: undefined }
            : undefined;
        },
        { timeoutMs: 90_000, intervalMs: 250 },
      );
      expect(end.taskFailure ?? 'no nondeterminism').toBe('no nondeterminism');
      const summary = await handle.result();

      expect(summary).toMatchObject({ total: 40, succeeded: 40, failed: 0, notRun: 0, runs: 1 });
      expect(sinkCounts(sink)).toEqual({ lines: 40, ids: 40, ok: 40 });
      const events = (await window.fetchHistory()).events ?? [];
      // One window, worked on by both workers.
      const workers = new Set(
        events.map((event) => event.workflowTaskStartedEventAttributes?.identity).filter(Boolean),
      );
      expect([...workers].sort()).toEqual(['new-code', 'old-code']);
      // The new worker took the patched branch once the run went live on it: a marker, then progress in the memo.
      const marker = events.findIndex((event) => patchIdOf(event) === PATCH_ID);
      expect(marker).toBeGreaterThan(
        events.findIndex((event) => event.workflowTaskStartedEventAttributes?.identity === 'new-code'),
      );
      expect((await window.describe()).memo?.progress).toEqual({
        window: 0,
        done: 40,
        failed: 0,
        lanes: expect.any(Number),
      });
    } finally {
      await oldWorker.stop();
      await newWorker?.stop();
      rmSync(directory, { recursive: true, force: true });
    }
  });
});
