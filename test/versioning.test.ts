import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import { createLlmClient } from '../src/llm/llm-client';
import { FanoutClient } from '../src/client/fanout-client';
import { createFanoutWorker } from '../src/worker';
import { batchDirectory, sinkCounts, writeTasks } from './support/batch-files';
import { childWorkflowIds, decodePayload } from './support/history';
import { ROOT } from './support/paths';
import { useTestServers } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

/**
 * A deploy while a batch is in flight (CONTRIBUTING.md, "Changing workflow code"): the batch starts on a worker with the
 * current workflow code, that worker stops half-way, and a worker whose batch window issues one command more (a memo
 * written at its next dispatch) takes the run over on the same task queue. Gated by `patched()`, the new command waits
 * until the window runs live on the new code and the batch finishes, every id once in the sink; not gated, the new
 * worker cannot replay the window's history. The change is made to a copy of src/ here, so the test needs no release
 * but the current one.
 */
const PATCH_ID = 'deploy-test-memo';
const NONDETERMINISM = temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR;
const WINDOW_FILE = path.join('src', 'workflows', 'batch', 'window.ts');
/** Where the change goes: the window's dispatch, which runs each time a lane ends, live or replayed. */
const DISPATCH = /\n( *)const dispatch = \(\): boolean => \{\n/;

const suite = useTestServers({ simulator: { latency: { minMs: 200, maxMs: 300 } } });
let scratch: string;

/** The workflow bundle of a copy of src/ whose window writes `{ deployed: true }` to its memo once, gated or not. */
async function bundleWithChange(gated: boolean): Promise<string> {
  const copy = mkdtempSync(path.join(scratch, gated ? 'gated-' : 'ungated-'));
  cpSync(path.join(ROOT, 'src'), path.join(copy, 'src'), { recursive: true });
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'));
  const window = path.join(copy, WINDOW_FILE);
  const code = readFileSync(window, 'utf8');
  const anchor = DISPATCH.exec(code);
  if (!anchor) throw new Error(`${WINDOW_FILE} has no \`const dispatch = (): boolean => {\`: move this test's change`);
  const indent = anchor[1];
  const gate = gated ? `patched('${PATCH_ID}')` : 'true';
  const change =
    `\n${indent}let deployed = false;${anchor[0]}` +
    `${indent}  if (!deployed && ${gate}) {\n${indent}    deployed = true;\n` +
    `${indent}    upsertMemo({ deployed: true });\n${indent}  }\n`;
  const header = gated ? "import { patched } from '@temporalio/workflow';\n" : '';
  writeFileSync(window, header + code.replace(DISPATCH, change));
  const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error };
  const bundle = await bundleWorkflowCode({
    workflowsPath: path.join(copy, 'src', 'workflows', 'index.ts'),
    logger: quiet,
  });
  const file = path.join(copy, 'workflow-bundle.js');
  writeFileSync(file, bundle.code);
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

/**
 * Starts a batch of 40 on the current code, stops its worker a third of the way, starts one on `newBundle`, and reports
 * how the window ended: completed, or its workflow task failed as nondeterministic.
 */
async function deployMidBatch(newBundle: string, check: (outcome: DeployOutcome) => Promise<void>): Promise<void> {
  const currentBundle = process.env.FANOUT_WORKFLOW_BUNDLE;
  if (!currentBundle)
    throw new Error('FANOUT_WORKFLOW_BUNDLE is not set (test/support/global-setup.ts sets it after `npm run build`)');
  const taskQueue = uniqueName('tq');
  const client = await FanoutClient.connect({ client: suite.servers.server.client, taskQueue });
  const directory = batchDirectory();
  const source = writeTasks(directory, 40, (index) => `item ${index}`, 'deploy');
  const sink = path.join(directory, 'deploy.out.jsonl');

  const oldWorker = await startWorker(taskQueue, currentBundle, 'old-code');
  let newWorker: { stop(): Promise<void> } | undefined;
  const handle = await client.startBatch({ source, sink, options: { concurrency: 4, pageSize: 10 } });
  let window: DeployOutcome['window'] | undefined;
  try {
    await waitFor(
      'the old worker to finish about a third of the batch',
      async () => (await handle.progress()).done >= 12,
    );
    await oldWorker.stop();
    // No worker answers queries now: the simulator says how far the old worker got.
    const answered = suite.servers.simulator
      .log()
      .filter((request) => request.workflowId === handle.batchId && request.respondedAt !== undefined);
    expect(answered.length).toBeGreaterThanOrEqual(12);
    expect(answered.length).toBeLessThan(40);
    // The batch's window is the workflow the change is made to.
    const windowId = childWorkflowIds(await handle.workflow.fetchHistory())[0];
    window = suite.servers.server.client.workflow.getHandle(windowId);
    expect((await window.describe()).memo?.deployed).toBeUndefined();

    newWorker = await startWorker(taskQueue, newBundle, 'new-code');
    // A run the new code cannot replay does not fail: its workflow task fails and is retried forever. So watch for that.
    const taskFailure = await waitFor(
      'the window to finish on the new worker, or to fail to replay there',
      async () => {
        const events = (await (window as DeployOutcome['window']).fetchHistory()).events ?? [];
        const failure = events.find((event) => event.workflowTaskFailedEventAttributes?.cause === NONDETERMINISM)
          ?.workflowTaskFailedEventAttributes?.failure?.message;
        if (failure) return { failure };
        return events.some((event) => event.workflowExecutionCompletedEventAttributes) ? { failure: null } : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    await check({ taskFailure: taskFailure.failure, window, handle, sink });
  } finally {
    // A window that cannot replay runs on until terminated (its batch's cancel never reaches its code).
    await handle.workflow.terminate('test over').catch(() => undefined);
    await window?.terminate('test over').catch(() => undefined);
    await oldWorker.stop();
    await newWorker?.stop();
    rmSync(directory, { recursive: true, force: true });
  }
}

interface DeployOutcome {
  /** The nondeterminism the window's workflow task failed with on the new worker; null if it completed. */
  taskFailure: string | null | undefined;
  window: ReturnType<typeof suite.servers.server.client.workflow.getHandle>;
  handle: Awaited<ReturnType<FanoutClient['startBatch']>>;
  sink: string;
}

beforeAll(() => {
  scratch = mkdtempSync(path.join(tmpdir(), 'fanout-versioning-'));
});

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

describe('deploying a change to the batch window workflow while a batch runs', () => {
  it('finishes the batch on the new code when the change is gated by patched(), every id once in the sink', async () => {
    const bundle = await bundleWithChange(true);
    await deployMidBatch(bundle, async ({ taskFailure, window, handle, sink }) => {
      expect(taskFailure ?? 'no nondeterminism').toBe('no nondeterminism');
      const summary = await handle.result();
      expect(summary).toMatchObject({ total: 40, succeeded: 40, failed: 0, notRun: 0, runs: 1 });
      expect(sinkCounts(sink)).toEqual({ lines: 40, ids: 40, ok: 40 });
      const events = (await window.fetchHistory()).events ?? [];
      // One window, worked on by both workers.
      const workers = new Set(
        events.map((event) => event.workflowTaskStartedEventAttributes?.identity).filter(Boolean),
      );
      expect([...workers].sort()).toEqual(['new-code', 'old-code']);
      // The new worker took the patched branch once the run went live on it: a marker, then the memo.
      const marker = events.findIndex((event) => patchIdOf(event) === PATCH_ID);
      expect(marker).toBeGreaterThan(
        events.findIndex((event) => event.workflowTaskStartedEventAttributes?.identity === 'new-code'),
      );
      expect((await window.describe()).memo).toMatchObject({ deployed: true, progress: { window: 0, done: 40 } });
    });
  });

  it('cannot replay the window on the new code when the same change is not gated', async () => {
    const bundle = await bundleWithChange(false);
    await deployMidBatch(bundle, async ({ taskFailure }) => {
      expect(taskFailure).toMatch(/Nondeterminism/);
    });
  });
});
