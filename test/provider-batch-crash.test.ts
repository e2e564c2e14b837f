import { writeFileSync } from 'node:fs';
import type { WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import path from 'node:path';
import type { ProviderBatchStats } from '../src/sim/provider-batches';
import type { ProviderBatchInput, ProviderBatchProgress, ProviderBatchResult } from '../src/workflows/provider-batch';
import { batchDirectory, readSink } from './support/batch-files';
import { QUICK_LOST_WORKER_DETECTION, useWorkerProcesses } from './support/suite-stack';
import { uniqueName, type TestServers } from './support/test-stack';
import { waitFor } from './support/wait-for';

const suite = useWorkerProcesses({ env: QUICK_LOST_WORKER_DETECTION });

const ITEMS = 20;

/**
 * Runs a one-part provider batch on a worker process, SIGKILLs it when `killWhen` holds, finishes on a second worker
 * process, and returns the result with the simulator's counters.
 */
async function crashAt(
  phase: string,
  killWhen: (
    stats: ProviderBatchStats,
    progress: () => Promise<ProviderBatchProgress>,
    handle: WorkflowHandleWithFirstExecutionRunId,
  ) => Promise<boolean> | boolean,
  { model, options }: { model?: string; options?: ProviderBatchInput['options'] } = {},
) {
  const taskQueue = uniqueName(`pb-crash-${phase}`);
  const { server, simulator } = suite.servers;
  const env = { ANTHROPIC_BASE_URL: simulator.baseUrl.replace(/\/v1$/, ''), ANTHROPIC_API_KEY: 'test-key' };
  const first = await suite.spawnWorker(taskQueue, env);
  const directory = batchDirectory();
  const source = path.join(directory, 'tasks.jsonl');
  const tasks = Array.from({ length: ITEMS }, (_, index) => ({
    id: `${phase}-${index}`,
    prompt: `item ${index}`,
    ...(model === undefined ? {} : { model }),
  }));
  writeFileSync(source, tasks.map((task) => JSON.stringify(task)).join('\n') + '\n');
  const batchId = uniqueName(`pb-${phase}`);
  const handle = await server.client.workflow.start('providerBatch', {
    taskQueue,
    workflowId: batchId,
    args: [
      {
        batchId,
        source,
        spool: path.join(directory, 'spool'),
        options: { pollIntervalMs: 300, maxPollIntervalMs: 1000, ...options },
      } satisfies ProviderBatchInput,
    ],
  });
  await waitFor(
    `the ${phase} phase`,
    () => killWhen(simulator.batchStats(), () => handle.query<ProviderBatchProgress>('providerBatchProgress'), handle),
    { timeoutMs: 60_000 },
  );
  await first.kill();
  await suite.spawnWorker(taskQueue, env);
  const result = (await handle.result()) as ProviderBatchResult;
  const lines = result.segments.flatMap((segment) => readSink(segment));
  return { result, lines, ids: tasks.map((task) => task.id), stats: simulator.batchStats(), handle };
}

function configure(
  providerBatches: NonNullable<Parameters<TestServers['simulator']['configure']>[0]>['providerBatches'],
): void {
  suite.servers.simulator.configure({ providerBatches });
  suite.servers.simulator.reset();
}

/** 1,000 simulated seconds per real one, and 4 s for the provider's answers to one kind of request: the phase to crash in. */
function slowPhase(phase: 'upload' | 'create' | 'download'): void {
  configure({
    speed: 1000,
    processingSeconds: { min: 100, max: 300 },
    latencyMs: { upload: 0, create: 0, download: 0, [phase]: 4000 },
  });
}

/** Asserts the lines hold every id once. */
function expectEachIdOnce(lines: { id: string }[], ids: string[]): void {
  expect(lines.map((line) => line.id).sort()).toEqual([...ids].sort());
}

describe('a worker SIGKILLed during the provider-batch route', () => {
  it('while uploading: the upload it finished is used, one provider batch is created, every id written once', async () => {
    slowPhase('upload');
    const { lines, ids, stats } = await crashAt('upload', (stats) => stats.filesUploaded >= 1);
    expect(stats).toMatchObject({ filesUploaded: 1, batchesCreated: 1, itemsAnswered: ITEMS });
    expectEachIdOnce(lines, ids);
  });

  it('while creating: the retried submit finds the batch by its metadata instead of creating a second', async () => {
    slowPhase('create');
    const { lines, ids, stats } = await crashAt('create', (stats) => stats.batchesCreated >= 1);
    expect(stats).toMatchObject({ filesUploaded: 1, batchesCreated: 1, itemsAnswered: ITEMS });
    expectEachIdOnce(lines, ids);
  });

  it('while creating an Anthropic batch: the retried submit finds it by its recorded intent, one batch per part', async () => {
    // Two parts of the same size, created one at a time: the batch made before the kill is the only unrecorded one.
    slowPhase('create');
    const { lines, ids, stats, result } = await crashAt(
      'anthropic-create',
      (stats) => stats.byProvider.anthropic.batchesCreated >= 1,
      {
        model: 'claude-haiku-4-5',
        options: { maxRequestsPerPart: ITEMS / 2, maxActiveParts: 2 },
      },
    );
    expect(stats.byProvider).toEqual({
      openai: { batchesCreated: 0, itemsAnswered: 0 },
      anthropic: { batchesCreated: 2, itemsAnswered: ITEMS },
    });
    expect(result.providerBatches.map((batch) => [batch.part, batch.status])).toEqual([
      [0, 'ended'],
      [1, 'ended'],
    ]);
    expectEachIdOnce(lines, ids);
  });

  it('while waiting between polls: the next worker goes on polling the same batch', async () => {
    // 10 simulated seconds per real one, 100 simulated seconds per batch: 10 s, most of it after the kill.
    configure({ speed: 10, processingSeconds: { min: 100, max: 100 } });
    const { lines, ids, stats, result } = await crashAt(
      'poll',
      async (stats, progress) =>
        stats.batchesCreated === 1 && (await progress()).providerBatches[0]?.status === 'in_progress',
    );
    expect(stats).toMatchObject({ batchesCreated: 1, itemsAnswered: ITEMS });
    expect(result.providerBatches).toHaveLength(1);
    expectEachIdOnce(lines, ids);
  });

  it('while a run that continued as new polls: the next worker goes on from the carried state, one batch, each id once', async () => {
    // Two polls a run, 200 simulated seconds per batch at 10 x (20 s): hand-overs before the kill and after it.
    configure({ speed: 10, processingSeconds: { min: 200, max: 200 } });
    let killedIn: string | undefined;
    const { lines, ids, stats, result, handle } = await crashAt(
      'continued',
      async (stats, progress, handle) => {
        if (stats.batchesCreated !== 1 || ((await progress()).providerBatches[0]?.counts.succeeded ?? 0) === 0)
          return false;
        killedIn = (await handle.describe()).runId;
        return killedIn !== handle.firstExecutionRunId;
      },
      { options: { maxPollsPerRun: 2 } },
    );
    // The run the worker died in was not the last: the next worker went on handing over.
    expect((await handle.describe()).runId).not.toBe(killedIn);
    expect(result.runs).toBeGreaterThanOrEqual(3);
    expect(stats).toMatchObject({ filesUploaded: 1, batchesCreated: 1, itemsAnswered: ITEMS });
    expect(result.providerBatches).toHaveLength(1);
    expectEachIdOnce(lines, ids);
  });

  it('while downloading: the results are downloaded again and the part segment rewritten, each id once', async () => {
    slowPhase('download');
    const { lines, ids, stats } = await crashAt('download', (stats) => stats.downloadsStarted >= 1);
    expect(stats.downloadsStarted).toBeGreaterThanOrEqual(2);
    expect(stats).toMatchObject({ batchesCreated: 1, itemsAnswered: ITEMS });
    expect(lines).toHaveLength(ITEMS);
    expectEachIdOnce(lines, ids);
  });
});
