import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import OpenAI from 'openai';
import type { BatchResultLine } from '../src/contract/batch';
import { BUILT_IN_PRICES, priceOf } from '../src/pricing';
import type { SimulatorConfigInput } from '../src/sim/config';
import type { ProviderBatchInput, ProviderBatchProgress, ProviderBatchResult } from '../src/workflows/provider-batch';
import { batchDirectory, readSink } from './support/batch-files';
import { useProviderBatchStack } from './support/provider-batch-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

/** Simulated time at 1,000 x: a batch of 100-300 simulated seconds answers in 0.1-0.3 s. */
const FAST: SimulatorConfigInput = { providerBatches: { speed: 1000, processingSeconds: { min: 100, max: 300 } } };

const suite = useProviderBatchStack(FAST);

beforeEach(() => {
  suite.servers.simulator.configure(FAST);
  suite.servers.simulator.reset();
});

function writeTaskFile(directory: string, tasks: { id: string; prompt: string; model?: string }[]): string {
  const file = path.join(directory, 'tasks.jsonl');
  writeFileSync(file, tasks.map((task) => JSON.stringify(task)).join('\n') + '\n');
  return file;
}

/**
 * Two fine items, one that expires ('late'), one that fails retryably ('flaky'), one that fails for good ('bad');
 * with `-once`, 'late' and 'flaky' fail only in the first provider batch they are in.
 */
function handedBackTasks(times: '' | '-once'): { id: string; prompt: string }[] {
  return [
    { id: 'fine-1', prompt: 'fine' },
    { id: 'late', prompt: `late [sim batch=expired${times}]` },
    { id: 'flaky', prompt: `flaky [sim batch=error-500${times}]` },
    { id: 'bad', prompt: 'bad [sim batch=error-400]' },
    { id: 'fine-2', prompt: 'fine' },
  ];
}

function linesOf(result: Pick<ProviderBatchResult, 'segments'>): BatchResultLine[] {
  return result.segments.flatMap((segment) => readSink(segment));
}

function retryIds(result: ProviderBatchResult): string[] {
  if (result.retry === undefined) return [];
  return readFileSync(result.retry, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => (JSON.parse(line) as { id: string }).id);
}

async function start(input: Omit<ProviderBatchInput, 'batchId' | 'spool'> & { spool?: string }) {
  const batchId = uniqueName('pb');
  const spool = input.spool ?? path.join(batchDirectory(), 'spool');
  const handle = await suite.servers.server.client.workflow.start('providerBatch', {
    taskQueue: suite.stack.taskQueue,
    workflowId: batchId,
    args: [
      {
        batchId,
        spool,
        ...input,
        options: { pollIntervalMs: 200, maxPollIntervalMs: 1000, ...input.options },
      } satisfies ProviderBatchInput,
    ],
  });
  return { handle, spool, batchId };
}

it('answers every item exactly once through OpenAI batches split by part, at half the standard price', async () => {
  const directory = batchDirectory();
  // Ids the providers' custom_id rules refuse are sent under mapped ids and come back under their own.
  const tasks = Array.from({ length: 25 }, (_, index) => ({
    id: index % 5 === 0 ? `doc/${index}.txt` : `item-${index}`,
    prompt: `summarise ${index}`,
  }));
  const { handle } = await start({ source: writeTaskFile(directory, tasks), options: { maxRequestsPerPart: 10 } });
  const result = (await handle.result()) as ProviderBatchResult;

  const lines = linesOf(result);
  expect(lines.map((line) => line.id).sort()).toEqual(tasks.map((task) => task.id).sort());
  expect(
    lines.every((line) => line.status === 'ok' && line.output?.startsWith('[simulated batch] answer to: summarise')),
  ).toBe(true);
  expect(result).toMatchObject({ succeeded: 25, failed: 0 });
  expect(result.retry).toBeUndefined();
  expect(result.providerBatches.map((batch) => [batch.provider, batch.status, batch.counts.total])).toEqual([
    ['openai', 'completed', 10],
    ['openai', 'completed', 10],
    ['openai', 'completed', 5],
  ]);
  const standard = lines.reduce((sum, line) => sum + (priceOf(line.model ?? '', line.usage, BUILT_IN_PRICES) ?? 0), 0);
  expect(result.cost.usd).toBeCloseTo(standard / 2, 9);
  expect(result.savingsUsd).toBeCloseTo(standard / 2, 9);
  expect(result.tokens.total).toBe(lines.reduce((sum, line) => sum + (line.usage?.totalTokens ?? 0), 0));
  const stats = suite.servers.simulator.batchStats();
  expect(stats).toMatchObject({ batchesCreated: 3, filesUploaded: 3, itemsAnswered: 25 });
  // No chat completion was sent: every answer came through the batch API.
  expect(suite.servers.simulator.log()).toHaveLength(0);
});

it('prices items the provider served from its prompt cache at the cached price, the batch discount stacked, from its own output', async () => {
  const directory = batchDirectory();
  // Two system prompts of 1,100 words (the simulator's tokens), shared by 20 items each.
  const systems = ['a', 'b'].map((seed) => Array.from({ length: 1100 }, (_, index) => `${seed}${index}`).join(' '));
  const tasks = Array.from({ length: 40 }, (_, index) => ({
    id: `cached-${index}`,
    system: systems[index % 2],
    prompt: `question ${index}`,
    model: 'gpt-4.1-mini',
  }));
  const { handle } = await start({ source: writeTaskFile(directory, tasks) });
  const result = (await handle.result()) as ProviderBatchResult;
  expect(result).toMatchObject({ succeeded: 40, failed: 0 });

  // The provider's own output file, read back from it: every bill recomputed from its usage fields.
  const openai = new OpenAI({ baseURL: suite.servers.simulator.baseUrl, apiKey: 'test-key', maxRetries: 0 });
  const usages = new Map<string, { prompt_tokens: number; completion_tokens: number; cached: number }>();
  for (const info of result.providerBatches) {
    const batch = await openai.batches.retrieve(info.id);
    const output = await (await openai.files.content(batch.output_file_id as string)).text();
    for (const text of output.split('\n').filter(Boolean)) {
      const line = JSON.parse(text) as {
        custom_id: string;
        response: {
          body: {
            usage: {
              prompt_tokens: number;
              completion_tokens: number;
              prompt_tokens_details?: { cached_tokens: number };
            };
          };
        };
      };
      const usage = line.response.body.usage;
      usages.set(line.custom_id, { ...usage, cached: usage.prompt_tokens_details?.cached_tokens ?? 0 });
    }
  }
  expect(usages.size).toBe(40);
  // Its batch (its own cache) missed each prefix once at most, and served 1,024 of 1,102 prompt tokens after that.
  const cachedItems = [...usages.values()].filter((usage) => usage.cached === 1024);
  expect(cachedItems.length).toBeGreaterThanOrEqual(38);
  // gpt-4.1-mini at batch prices: $0.20 input, $0.05 cached input, $0.80 output per million.
  const bill = (usage: { prompt_tokens: number; completion_tokens: number; cached: number }) =>
    ((usage.prompt_tokens - usage.cached) * 0.2 + usage.cached * 0.05 + usage.completion_tokens * 0.8) / 1e6;
  const lines = linesOf(result);
  // Custom ids are the task ids here (they fit the provider's rules).
  for (const line of lines) {
    const usage = usages.get(line.id);
    expect([line.id, line.usage?.cachedPromptTokens ?? 0]).toEqual([line.id, usage?.cached]);
    expect(line.costUsd).toBeCloseTo(bill(usage as NonNullable<typeof usage>), 12);
  }
  const billed = [...usages.values()].reduce((sum, usage) => sum + bill(usage), 0);
  expect(result.cost.usd).toBeCloseTo(billed, 9);
  expect(result.tokens.cached).toBe([...usages.values()].reduce((sum, usage) => sum + usage.cached, 0));
  // What caching saved, at the batch price: the cached tokens' input price less their cached price.
  expect(result.cost.cacheSavingsUsd).toBeCloseTo(((result.tokens.cached ?? 0) * (0.2 - 0.05)) / 1e6, 9);
});

it('hands expired and retryably errored items back for a sync retry, and writes items that failed for good once', async () => {
  suite.servers.simulator.configure({
    providerBatches: { speed: 1000, processingSeconds: { min: 100, max: 300 }, expiresAfterSeconds: 1500 },
  });
  const directory = batchDirectory();
  const tasks = handedBackTasks('');
  const { handle } = await start({ source: writeTaskFile(directory, tasks) });
  const result = (await handle.result()) as ProviderBatchResult;

  const lines = linesOf(result);
  expect(lines.map((line) => [line.id, line.status]).sort()).toEqual([
    ['bad', 'failed'],
    ['fine-1', 'ok'],
    ['fine-2', 'ok'],
  ]);
  expect(retryIds(result).sort()).toEqual(['flaky', 'late']);
  // Each retry line says where its task is in the source, so the sync path can read it without a scan.
  const source = readFileSync(path.join(directory, 'tasks.jsonl'));
  for (const line of readFileSync(result.retry as string, 'utf8')
    .split('\n')
    .filter(Boolean)) {
    const retry = JSON.parse(line) as { id: string; offset: number; length: number };
    expect(
      (JSON.parse(source.subarray(retry.offset, retry.offset + retry.length).toString()) as { id: string }).id,
    ).toBe(retry.id);
  }
  expect(result).toMatchObject({ succeeded: 2, failed: 1 });
  expect(result.providerBatches[0].status).toBe('expired');
});

describe('items a provider batch hands back', () => {
  const tasks = handedBackTasks('-once');

  it('go into a new provider batch when the deadline leaves twice the time the first round took', async () => {
    // The first batch ends when its expired item's window closes: 1,500 simulated seconds, 1.5 s; 24 h are left.
    suite.servers.simulator.configure({
      providerBatches: { speed: 1000, processingSeconds: { min: 100, max: 300 }, expiresAfterSeconds: 1500 },
    });
    const { handle } = await start({ source: writeTaskFile(batchDirectory(), tasks) });
    const result = (await handle.result()) as ProviderBatchResult;

    expect(result.retry).toBeUndefined();
    const lines = linesOf(result);
    expect(lines.map((line) => [line.id, line.status, line.attempts]).sort()).toEqual([
      ['bad', 'failed', 1],
      ['fine-1', 'ok', 1],
      ['fine-2', 'ok', 1],
      ['flaky', 'ok', 2],
      ['late', 'ok', 2],
    ]);
    expect(result).toMatchObject({ succeeded: 4, failed: 1 });
    expect(result.providerBatches.map((batch) => [batch.part, batch.status, batch.counts.total])).toEqual([
      [0, 'expired', 5],
      [1, 'completed', 2],
    ]);
    expect(suite.servers.simulator.batchStats()).toMatchObject({
      batchesCreated: 2,
      itemsSubmitted: 7,
      itemsAnswered: 4,
    });
    expect(await handle.query<ProviderBatchProgress>('providerBatchProgress')).toMatchObject({
      parts: 2,
      collected: 2,
      retried: 0,
    });
    // Nothing went the sync way.
    expect(suite.servers.simulator.log()).toHaveLength(0);
  });

  it('are handed back to be sent sync when the deadline is nearer than twice the time the first round took', async () => {
    // The first batch takes 40 simulated seconds at 10 x, 4 s; a 7 s deadline leaves about 3 s after it, short of 8.
    suite.servers.simulator.configure({
      providerBatches: { speed: 10, processingSeconds: { min: 10, max: 20 }, expiresAfterSeconds: 40 },
    });
    const { handle } = await start({ source: writeTaskFile(batchDirectory(), tasks), options: { deadlineMs: 7000 } });
    const result = (await handle.result()) as ProviderBatchResult;

    expect(retryIds(result).sort()).toEqual(['flaky', 'late']);
    expect(
      linesOf(result)
        .map((line) => [line.id, line.status])
        .sort(),
    ).toEqual([
      ['bad', 'failed'],
      ['fine-1', 'ok'],
      ['fine-2', 'ok'],
    ]);
    expect(result.providerBatches).toHaveLength(1);
    expect(suite.servers.simulator.batchStats()).toMatchObject({
      batchesCreated: 1,
      itemsSubmitted: 5,
      itemsAnswered: 2,
    });
    expect(await handle.query<ProviderBatchProgress>('providerBatchProgress')).toMatchObject({ parts: 1, retried: 2 });
  });
});

it('continues as new during a long wait, carrying its parts: each provider batch created once, every result written once', async () => {
  // Batches of 20-30 simulated seconds at 10 x (2-3 s; the part with an expiring item 4 s), polled every 0.2-1 s, three
  // polls a run: a run hands over several times per batch, between submits, mid-round and between rounds.
  suite.servers.simulator.configure({
    providerBatches: { speed: 10, processingSeconds: { min: 20, max: 30 }, expiresAfterSeconds: 40 },
  });
  const tasks = Array.from({ length: 12 }, (_, index) => ({
    id: `can-${index}`,
    prompt: index === 5 ? 'late [sim batch=expired-once]' : `item ${index}`,
  }));
  const { handle } = await start({
    source: writeTaskFile(batchDirectory(), tasks),
    options: { maxRequestsPerPart: 4, maxActiveParts: 2, maxPollsPerRun: 3 },
  });
  const result = (await handle.result()) as ProviderBatchResult;

  expect(result.runs).toBeGreaterThan(2);
  expect((await handle.describe()).runId).not.toBe(handle.firstExecutionRunId);
  const lines = linesOf(result);
  expect(lines.map((line) => line.id).sort()).toEqual(tasks.map((task) => task.id).sort());
  expect(lines.every((line) => line.status === 'ok')).toBe(true);
  expect(result).toMatchObject({ succeeded: 12, failed: 0 });
  expect(result.retry).toBeUndefined();
  // Three parts and one of the item the first round handed back: four batches, each created once and listed once.
  const stats = suite.servers.simulator.batchStats();
  expect(stats).toMatchObject({ filesUploaded: 4, batchesCreated: 4, itemsSubmitted: 13, itemsAnswered: 12 });
  expect(result.providerBatches.map((batch) => [batch.part, batch.id])).toEqual(
    stats.batches
      .map((batch) => [Number(batch.metadata.fanout_part), batch.id])
      .sort((left, right) => Number(left[0]) - Number(right[0])),
  );
  expect(result.providerBatches.map((batch) => [batch.part, batch.counts.total])).toEqual([
    [0, 4],
    [1, 4],
    [2, 4],
    [3, 1],
  ]);
  expect(suite.servers.simulator.log()).toHaveLength(0);
});

it('runs claude-* tasks through Anthropic Message Batches and the rest through OpenAI, one model per part', async () => {
  const directory = batchDirectory();
  const tasks = [
    ...Array.from({ length: 6 }, (_, index) => ({
      id: `c-${index}`,
      prompt: `claude ${index}`,
      model: 'claude-haiku-4-5',
    })),
    ...Array.from({ length: 4 }, (_, index) => ({ id: `o-${index}`, prompt: `openai ${index}`, model: 'gpt-4o-mini' })),
    { id: 'c-late', prompt: 'late [sim batch=expired]', model: 'claude-haiku-4-5' },
  ];
  suite.servers.simulator.configure({
    providerBatches: { speed: 1000, processingSeconds: { min: 100, max: 300 }, expiresAfterSeconds: 1500 },
  });
  const { handle } = await start({ source: writeTaskFile(directory, tasks), options: { retryRounds: 0 } });
  const result = (await handle.result()) as ProviderBatchResult;

  const lines = linesOf(result);
  expect(lines.map((line) => line.id).sort()).toEqual(
    tasks
      .map((task) => task.id)
      .filter((id) => id !== 'c-late')
      .sort(),
  );
  expect(lines.find((line) => line.id === 'c-0')).toMatchObject({ status: 'ok', model: 'claude-haiku-4-5' });
  expect(retryIds(result)).toEqual(['c-late']);
  expect(result.providerBatches.map((batch) => [batch.provider, batch.status]).sort()).toEqual([
    ['anthropic', 'ended'],
    ['openai', 'completed'],
  ]);
  expect(suite.servers.simulator.batchStats().byProvider).toEqual({
    openai: { batchesCreated: 1, itemsAnswered: 4 },
    anthropic: { batchesCreated: 1, itemsAnswered: 6 },
  });
  const claude = priceOf('claude-haiku-4-5', lines.find((line) => line.id === 'c-0')?.usage, BUILT_IN_PRICES, 'batch');
  expect(lines.find((line) => line.id === 'c-0')?.costUsd).toBe(claude);
});

it('waits out token_limit_exceeded and submits the refused part again once earlier batches have drained', async () => {
  // Each task's prompt is 2 words: a part of 5 enqueues 10 tokens, and the limit holds one part at a time.
  suite.servers.simulator.configure({
    providerBatches: { speed: 1000, processingSeconds: { min: 500, max: 800 }, enqueuedTokenLimit: 12 },
  });
  const directory = batchDirectory();
  const tasks = Array.from({ length: 10 }, (_, index) => ({ id: `t-${index}`, prompt: `task ${index}` }));
  const { handle } = await start({
    source: writeTaskFile(directory, tasks),
    options: { maxRequestsPerPart: 5, maxActiveParts: 2 },
  });
  const result = (await handle.result()) as ProviderBatchResult;

  expect(
    linesOf(result)
      .map((line) => line.id)
      .sort(),
  ).toEqual(tasks.map((task) => task.id).sort());
  const refused = result.providerBatches.filter((batch) => batch.status === 'failed');
  expect(refused.length).toBeGreaterThanOrEqual(1);
  expect(result.providerBatches.filter((batch) => batch.status === 'completed')).toHaveLength(2);
  expect(suite.servers.simulator.batchStats().itemsAnswered).toBe(10);
});

it('past its deadline cancels the provider batch, keeps what it answered and hands the rest back', async () => {
  // 40 s of simulated time per batch at 10 x: 4 s; the deadline comes after about half of it.
  suite.servers.simulator.configure({ providerBatches: { speed: 10, processingSeconds: { min: 40, max: 40 } } });
  const directory = batchDirectory();
  const tasks = Array.from({ length: 40 }, (_, index) => ({ id: `d-${index}`, prompt: `item ${index}` }));
  const { handle } = await start({ source: writeTaskFile(directory, tasks), options: { deadlineMs: 2000 } });
  const result = (await handle.result()) as ProviderBatchResult;

  const answered = linesOf(result).map((line) => line.id);
  const handedBack = retryIds(result);
  expect(answered.length).toBeGreaterThan(0);
  expect(handedBack.length).toBeGreaterThan(0);
  expect([...answered, ...handedBack].sort()).toEqual(tasks.map((task) => task.id).sort());
  expect(result.providerBatches[0].status).toBe('cancelled');
  expect(suite.servers.simulator.batchStats()).toMatchObject({ cancelled: 1, itemsAnswered: answered.length });
});

it('takes the deadline as a time too (a batch passing its own deadline to the route)', async () => {
  suite.servers.simulator.configure({ providerBatches: { speed: 10, processingSeconds: { min: 40, max: 40 } } });
  const directory = batchDirectory();
  const tasks = Array.from({ length: 20 }, (_, index) => ({ id: `t-${index}`, prompt: `item ${index}` }));
  const { handle } = await start({
    source: writeTaskFile(directory, tasks),
    options: { deadlineAtMs: Date.now() + 2000 },
  });
  const result = (await handle.result()) as ProviderBatchResult;
  expect(result.providerBatches[0].status).toBe('cancelled');
  expect(linesOf(result).length + retryIds(result).length).toBe(20);
});

it('cancelled, cancels its provider batches and writes every result that came back before it ends', async () => {
  suite.servers.simulator.configure({ providerBatches: { speed: 10, processingSeconds: { min: 60, max: 60 } } });
  const directory = batchDirectory();
  const tasks = Array.from({ length: 30 }, (_, index) => ({ id: `x-${index}`, prompt: `item ${index}` }));
  const { handle, spool } = await start({
    source: writeTaskFile(directory, tasks),
    options: { maxRequestsPerPart: 15 },
  });
  await waitFor('some items to be answered', async () => {
    const progress = await handle.query<ProviderBatchProgress>('providerBatchProgress');
    return (
      progress.providerBatches.length === 2 && progress.providerBatches.every((batch) => batch.counts.succeeded > 0)
    );
  });
  await handle.cancel();
  await expect(handle.result()).rejects.toThrow(WorkflowFailedError);

  const stats = suite.servers.simulator.batchStats();
  expect(stats.cancelled).toBe(2);
  expect(stats.batches.map((batch) => batch.status)).toEqual(['cancelled', 'cancelled']);
  const segments = ['seg-part-00000.jsonl', 'seg-part-00001.jsonl']
    .map((name) => path.join(spool, name))
    .filter((file) => existsSync(file));
  const lines = segments.flatMap((segment) => readSink(segment));
  expect(lines.length).toBe(stats.itemsAnswered);
  expect(lines.length).toBeGreaterThan(0);
  expect(new Set(lines.map((line) => line.id)).size).toBe(lines.length);
});

it('creates its own provider batch when run again soon after a cancelled run of the same batch and items', async () => {
  // The run cancelled its provider batch; a resume within the hour lists it (same batch, part, attempt and items), and
  // must not take it for its own: it would wait on a batch that answers nothing more.
  suite.servers.simulator.configure({ providerBatches: { speed: 10, processingSeconds: { min: 60, max: 60 } } });
  const directory = batchDirectory();
  const source = writeTaskFile(
    directory,
    Array.from({ length: 4 }, (_, index) => ({ id: `again-${index}`, prompt: `item ${index}` })),
  );
  const first = await start({ source });
  await waitFor('the provider batch to be created', () => suite.servers.simulator.batchStats().batchesCreated === 1);
  await first.handle.cancel();
  await expect(first.handle.result()).rejects.toThrow(WorkflowFailedError);
  expect(suite.servers.simulator.batchStats().cancelled).toBe(1);

  suite.servers.simulator.configure(FAST);
  const again = await suite.servers.server.client.workflow.start('providerBatch', {
    taskQueue: suite.stack.taskQueue,
    workflowId: `${first.batchId}-again`,
    args: [
      {
        batchId: first.batchId,
        spool: path.join(batchDirectory(), 'spool'),
        source,
        options: { pollIntervalMs: 200, maxPollIntervalMs: 1000 },
      } satisfies ProviderBatchInput,
    ],
  });
  const result: ProviderBatchResult = await again.result();
  expect(suite.servers.simulator.batchStats().batchesCreated).toBe(2);
  expect(result.providerBatches.map((batch) => batch.status)).toEqual(['completed']);
  expect(linesOf(result).map((line) => line.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
});

it('skips the ids a resume already has ok', async () => {
  const directory = batchDirectory();
  const tasks = Array.from({ length: 6 }, (_, index) => ({ id: `r-${index}`, prompt: `item ${index}` }));
  const kept = path.join(directory, 'kept.jsonl');
  writeFileSync(
    kept,
    ['r-0', 'r-1']
      .map((id) => JSON.stringify({ id, status: 'ok', output: 'earlier', attempts: 1, durationMs: 1 }))
      .join('\n') + '\n',
  );
  const { handle } = await start({ source: writeTaskFile(directory, tasks), skipIds: kept });
  const result = (await handle.result()) as ProviderBatchResult;
  expect(
    linesOf(result)
      .map((line) => line.id)
      .sort(),
  ).toEqual(['r-2', 'r-3', 'r-4', 'r-5']);
  expect(suite.servers.simulator.batchStats().itemsSubmitted).toBe(4);
});
