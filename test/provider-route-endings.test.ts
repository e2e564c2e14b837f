import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import type { SimulatorConfigInput } from '../src/sim/config';
import type { ProviderBatchInput } from '../src/workflows/provider-batch';
import { batchDirectory, readSink, sinkCounts } from './support/batch-files';
import { useProviderBatchStack } from './support/provider-batch-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

/**
 * How the provider-batch route ends when it fails (issue 33, findings 1 and 2): what its provider batches answered
 * reaches the sink, and a resume sends none of it again.
 */

/** 1,000 x: a provider batch answers in 0.1-0.3 s; an item marked to expire holds its batch open for 5 s. */
const FAST = {
  speed: 1000,
  processingSeconds: { min: 100, max: 300 },
  expiresAfterSeconds: 5000,
} satisfies SimulatorConfigInput['providerBatches'];

const suite = useProviderBatchStack({ providerBatches: FAST }, ['openai']);

afterEach(() => suite.servers.simulator.configure({ providerBatches: FAST }));

/** The provider segments a batch's spool holds now, with their lines. */
function providerSegments(sink: string): string[][] {
  const parts = `${sink}.parts`;
  return readdirSync(parts).flatMap((run) => {
    const provider = path.join(parts, run, 'provider');
    const names = (() => {
      try {
        return readdirSync(provider);
      } catch {
        return [];
      }
    })();
    return names
      .filter((name) => /^seg-part-\d+\.jsonl$/.test(name))
      .map((name) => readFileSync(path.join(provider, name), 'utf8').split('\n').filter(Boolean));
  });
}

it('a provider-batch route that fails after one part was answered writes those answers to the sink, and a resume sends only the rest', async () => {
  const { simulator } = suite.servers;
  const directory = batchDirectory();
  const source = path.join(directory, 'failing-route.jsonl');
  // Two parts, one per model: "a" answers at once; "b" (expiring in its first provider batch) stays open for 5 s.
  const tasks = [
    ...Array.from({ length: 20 }, (_, index) => ({ id: `a-${index}`, prompt: `a ${index}` })),
    ...Array.from({ length: 10 }, (_, index) => ({
      id: `b-${index}`,
      prompt: `b ${index} [sim batch=expired-once]`,
      model: 'sim-b',
    })),
  ];
  writeFileSync(source, `${tasks.map((task) => JSON.stringify(task)).join('\n')}\n`);
  const sink = path.join(directory, 'failing-route.out.jsonl');
  const handle = await suite.stack.client.startBatch({
    source,
    sink,
    options: { route: 'provider-batch', providerPollSeconds: 0.05 },
  });
  await waitFor('part "a" collected', () => providerSegments(sink).some((lines) => lines.length === 20), {
    timeoutMs: 30_000,
    intervalMs: 20,
  });
  // Then the provider loses part "b": its next poll is refused for good, which fails the route.
  simulator.configure({ providerBatches: { ...FAST, refusedModels: { retrieve: ['sim-b'] } } });
  const failure = await handle.result().catch((error: unknown) => error);
  expect(failure).toBeInstanceOf(WorkflowFailedError);
  expect(String((failure as WorkflowFailedError).cause?.message)).toContain('the provider refused a batch request');
  // The 20 answers part "a" paid for are in the sink (before: the batch failed without writing one).
  expect(sinkCounts(sink)).toEqual({ lines: 20, ids: 20, ok: 20 });
  expect(readSink(sink).every((line) => line.id.startsWith('a-'))).toBe(true);

  simulator.configure({ providerBatches: FAST });
  const submittedBefore = simulator.batchStats().itemsSubmitted;
  const requestsBefore = simulator.log().length;
  const resumed = await suite.stack.client.resumeBatch(handle.batchId);
  expect(await resumed.result()).toMatchObject({ total: 10, alreadyOk: 20, succeeded: 10, failed: 0 });
  expect(sinkCounts(sink)).toEqual({ lines: 30, ids: 30, ok: 30 });
  // Only part "b" was sent again, in one provider batch; nothing went sync.
  expect(simulator.batchStats().itemsSubmitted - submittedBefore).toBe(10);
  expect(simulator.log().length).toBe(requestsBefore);
}, 120_000);

it('a provider-batch route that fails while another part is still uploading cancels the batch that upload creates, rather than leave it running unwatched', async () => {
  const { simulator, server } = suite.servers;
  const slowUploads = { ...FAST, latencyMs: { upload: 2000, create: 0, download: 0 } };
  const uploadsBefore = simulator.batchStats().filesUploaded;
  simulator.configure({ providerBatches: slowUploads });
  const directory = batchDirectory();
  const source = path.join(directory, 'uploading.jsonl');
  // Three parts, two at a time: "b" (held open) and "a" (answered at once) first, then "c" once "a" has ended.
  const tasks = [
    ...Array.from({ length: 10 }, (_, index) => ({
      id: `b-${index}`,
      prompt: `b [sim batch=expired]`,
      model: 'sim-b',
    })),
    ...Array.from({ length: 20 }, (_, index) => ({ id: `a-${index}`, prompt: `a ${index}` })),
    ...Array.from({ length: 5 }, (_, index) => ({ id: `c-${index}`, prompt: `c [sim batch=expired]`, model: 'sim-c' })),
  ];
  writeFileSync(source, `${tasks.map((task) => JSON.stringify(task)).join('\n')}\n`);
  const batchId = uniqueName('uploading');
  const handle = await server.client.workflow.start('providerBatch', {
    taskQueue: suite.stack.taskQueue,
    workflowId: batchId,
    args: [
      {
        batchId,
        source,
        spool: path.join(directory, 'spool'),
        options: { pollIntervalMs: 50, maxPollIntervalMs: 200, maxActiveParts: 2 },
      } satisfies ProviderBatchInput,
    ],
  });
  // Part "c" is uploading (its upload answers 2 s after it arrived): now part "b" is lost, failing the route.
  await waitFor('part "c" uploading', () => simulator.batchStats().filesUploaded === uploadsBefore + 3, {
    timeoutMs: 30_000,
    intervalMs: 20,
  });
  simulator.configure({ providerBatches: { ...slowUploads, refusedModels: { retrieve: ['sim-b'] } } });
  await expect(handle.result()).rejects.toBeInstanceOf(WorkflowFailedError);

  const partC = () => simulator.batchStats().batches.find((batch) => batch.items === 5);
  await waitFor('part "c" created and ended', () => partC() !== undefined && partC()?.status !== 'in_progress', {
    timeoutMs: 20_000,
  });
  // Before: the clean-up ran while "c" uploaded, found no batch of it, and its batch then ran on until it expired.
  expect(partC()?.status).toBe('cancelled');
}, 120_000);

it('a part the provider refuses ends alone: its items fail naming the refusal, the other part is answered, and a resume sends only the refused items', async () => {
  const { simulator } = suite.servers;
  simulator.configure({ providerBatches: { ...FAST, refusedModels: { create: ['sim-x'] } } });
  const directory = batchDirectory();
  const source = path.join(directory, 'refused-part.jsonl');
  const tasks = [
    ...Array.from({ length: 20 }, (_, index) => ({ id: `ok-${index}`, prompt: `ok ${index}` })),
    ...Array.from({ length: 10 }, (_, index) => ({ id: `x-${index}`, prompt: `x ${index}`, model: 'sim-x' })),
  ];
  writeFileSync(source, `${tasks.map((task) => JSON.stringify(task)).join('\n')}\n`);
  const sink = path.join(directory, 'refused-part.out.jsonl');
  const before = simulator.batchStats();
  const requestsBefore = simulator.log().length;
  const handle = await suite.stack.client.startBatch({
    source,
    sink,
    options: { route: 'provider-batch', providerPollSeconds: 0.05 },
  });
  // Before: the refusal failed the whole batch.
  expect(await handle.result()).toMatchObject({ route: 'provider-batch', total: 30, succeeded: 20, failed: 10 });
  const refused = readSink(sink).filter((line) => line.id.startsWith('x-'));
  expect(refused).toHaveLength(10);
  for (const line of refused) {
    expect(line.status).toBe('failed');
    expect(line.error?.type).toBe('ProviderBatchRefused');
    expect(line.error?.message).toContain('model sim-x is not available for batch');
  }
  expect(simulator.batchStats().batchesCreated - before.batchesCreated).toBe(1);
  expect(simulator.log().length).toBe(requestsBefore);

  simulator.configure({ providerBatches: FAST });
  const submitted = simulator.batchStats().itemsSubmitted;
  const resumed = await suite.stack.client.resumeBatch(handle.batchId);
  expect(await resumed.result()).toMatchObject({ total: 10, alreadyOk: 20, succeeded: 10, failed: 0 });
  expect(sinkCounts(sink)).toEqual({ lines: 30, ids: 30, ok: 30 });
  expect(simulator.batchStats().itemsSubmitted - submitted).toBe(10);
}, 120_000);

it('refuses a provider-batch route with a budget before anything is sent, from this client and from any other', async () => {
  const { simulator, server } = suite.servers;
  const directory = batchDirectory();
  const source = path.join(directory, 'budgeted.jsonl');
  writeFileSync(
    source,
    `${JSON.stringify({ id: 'one', prompt: 'x' })}\n${JSON.stringify({ id: 'two', prompt: 'y' })}\n`,
  );
  const before = simulator.batchStats().batchesCreated;
  const requestsBefore = simulator.log().length;
  for (const budget of [{ costBudgetUsd: 0.01 }, { tokenBudget: 1000 }]) {
    const error = await suite.stack.client
      .startBatch({
        source,
        sink: path.join(directory, 'budgeted.out.jsonl'),
        options: { route: 'provider-batch', ...budget },
      })
      .catch((caught: unknown) => caught);
    expect(String(error)).toContain('a provider batch cannot keep to tokenBudget or costBudgetUsd');
  }
  // Started by a client that does not check (the workflow's input is the public contract): it fails at once.
  const batchId = uniqueName('budgeted');
  const workflow = await server.client.workflow.start('batch', {
    taskQueue: suite.stack.taskQueue,
    workflowId: batchId,
    args: [
      {
        batchId,
        source,
        sink: path.join(directory, 'other.out.jsonl'),
        options: { route: 'provider-batch', costBudgetUsd: 0.01 },
      },
    ],
  });
  const failure = await workflow.result().catch((caught: unknown) => caught);
  expect(failure).toBeInstanceOf(WorkflowFailedError);
  expect(String((failure as WorkflowFailedError).cause?.message)).toContain('use route "flex"');
  expect(simulator.batchStats().batchesCreated).toBe(before);
  expect(simulator.log().length).toBe(requestsBefore);
});

it('a providerBatch run shows its progress as its current details in the UI, whoever started it', async () => {
  const { server } = suite.servers;
  const directory = batchDirectory();
  const source = path.join(directory, 'details.jsonl');
  writeFileSync(
    source,
    `${JSON.stringify({ id: 'one', prompt: 'x' })}\n${JSON.stringify({ id: 'two', prompt: 'y' })}\n`,
  );
  const batchId = uniqueName('details');
  // Started with no summary, as another client would start it.
  const handle = await server.client.workflow.start('providerBatch', {
    taskQueue: suite.stack.taskQueue,
    workflowId: batchId,
    args: [
      {
        batchId,
        source,
        spool: path.join(directory, 'spool'),
        options: { pollIntervalMs: 50 },
      } satisfies ProviderBatchInput,
    ],
  });
  await handle.result();
  const metadata = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
  expect(metadata.currentDetails).toBe(
    `provider batches of batch ${batchId}: 1 of 1 parts collected, 2 answered, 0 failed`,
  );
});
