import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { toFile } from 'openai';
import { customIdFor, providerOfModel } from '../src/provider-batch/limits';
import { parseDuration, resolveAutoRoute } from '../src/contract/route-options';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { waitFor } from './support/wait-for';

let simulator: Simulator;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  simulator = await startSimulator({ providerBatches: { speed: 100, processingSeconds: { min: 100, max: 100 } } });
  openai = new OpenAI({ apiKey: 'test-key', baseURL: simulator.baseUrl, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'test-key', baseURL: simulator.baseUrl.replace(/\/v1$/, ''), maxRetries: 0 });
});

afterAll(async () => {
  await simulator?.close();
});

beforeEach(() => simulator.reset());

const requestLines = (count: number, model = 'gpt-4o-mini', url = '/v1/chat/completions') =>
  Array.from({ length: count }, (_, index) =>
    JSON.stringify({
      custom_id: `r${index}`,
      method: 'POST',
      url,
      body: { model, messages: [{ role: 'user', content: `question ${index}` }] },
    }),
  ).join('\n') + '\n';

async function upload(text: string): Promise<string> {
  return (await openai.files.create({ file: await toFile(Buffer.from(text), 'requests.jsonl'), purpose: 'batch' })).id;
}

describe("the simulator's OpenAI Batch API", () => {
  it('runs a batch on its fast clock: in progress, then completed with an output file of every answer', async () => {
    const batch = await openai.batches.create({
      input_file_id: await upload(requestLines(4)),
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
      metadata: { fanout_part: '0' },
    });
    expect(batch.status).toBe('in_progress');
    const done = await waitFor('the batch to complete', async () => {
      const current = await openai.batches.retrieve(batch.id);
      return current.status === 'completed' && current;
    });
    expect(done.request_counts).toEqual({ total: 4, completed: 4, failed: 0 });
    const output = await (await openai.files.content(done.output_file_id as string)).text();
    const lines = output
      .trim()
      .split('\n')
      .map(
        (line) =>
          JSON.parse(line) as {
            custom_id: string;
            response: { status_code: number; body: { choices: { message: { content: string } }[] } };
          },
      );
    expect(lines.map((line) => line.custom_id).sort()).toEqual(['r0', 'r1', 'r2', 'r3']);
    expect(lines[0].response.status_code).toBe(200);
    expect(lines.find((line) => line.custom_id === 'r2')?.response.body.choices[0].message.content).toBe(
      '[simulated batch] answer to: question 2',
    );
    expect(simulator.batchStats()).toMatchObject({
      filesUploaded: 1,
      batchesCreated: 1,
      itemsSubmitted: 4,
      itemsAnswered: 4,
    });
  });

  it('lists batches newest first with their metadata, which is how a retried submit finds its part', async () => {
    const file = await upload(requestLines(1));
    for (const part of ['0', '1', '2'])
      await openai.batches.create({
        input_file_id: file,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
        metadata: { fanout_part: part },
      });
    const listed = [];
    for await (const batch of openai.batches.list({ limit: 2 })) listed.push(batch.metadata?.fanout_part);
    expect(listed).toEqual(['2', '1', '0']);
  });

  it('keeps the answers of a cancelled batch and reports the rest as cancelled in its error file', async () => {
    simulator.configure({ providerBatches: { speed: 10, processingSeconds: { min: 20, max: 20 } } });
    const batch = await openai.batches.create({
      input_file_id: await upload(requestLines(40)),
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    await waitFor(
      'some answers',
      async () => ((await openai.batches.retrieve(batch.id)).request_counts?.completed ?? 0) > 0,
    );
    expect((await openai.batches.cancel(batch.id)).status).toBe('cancelling');
    const ended = await openai.batches.retrieve(batch.id);
    expect(ended.status).toBe('cancelled');
    const answered = ended.request_counts?.completed ?? 0;
    expect(answered).toBeGreaterThan(0);
    expect(answered).toBeLessThan(40);
    const errors = (await (await openai.files.content(ended.error_file_id as string)).text()).trim().split('\n');
    expect(errors).toHaveLength(40 - answered);
    expect(JSON.parse(errors[0])).toMatchObject({ response: null, error: { code: 'batch_cancelled' } });
    expect(simulator.batchStats()).toMatchObject({ cancelled: 1, itemsAnswered: answered });
  });

  it('fails a file of two models, as OpenAI does (one model per file)', async () => {
    const mixed = requestLines(1, 'gpt-4o-mini') + requestLines(1, 'gpt-4o').replace('"r0"', '"r1"');
    const batch = await openai.batches.create({
      input_file_id: await upload(mixed),
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    expect(batch.status).toBe('failed');
    expect(batch.errors?.data?.[0]?.code).toBe('mixed_models');
  });

  it('answers /v1/responses requests in a Responses API batch', async () => {
    const line =
      JSON.stringify({
        custom_id: 'q',
        method: 'POST',
        url: '/v1/responses',
        body: { model: 'gpt-4o-mini', input: 'what is new?' },
      }) + '\n';
    const batch = await openai.batches.create({
      input_file_id: await upload(line),
      endpoint: '/v1/responses',
      completion_window: '24h',
    });
    const done = await waitFor('the batch to complete', async () => {
      const current = await openai.batches.retrieve(batch.id);
      return current.status === 'completed' && current;
    });
    const output = JSON.parse(await (await openai.files.content(done.output_file_id as string)).text()) as {
      response: { body: { object: string; output: { content: { text: string }[] }[] } };
    };
    expect(output.response.body.object).toBe('response');
    expect(output.response.body.output[0].content[0].text).toBe('[simulated batch] answer to: what is new?');
  });
});

describe("the simulator's Anthropic Message Batches", () => {
  it('runs a batch and streams its results: succeeded, errored and (after the window) expired', async () => {
    simulator.configure({
      providerBatches: { speed: 100, processingSeconds: { min: 100, max: 100 }, expiresAfterSeconds: 200 },
    });
    const params = (content: string) => ({
      model: 'claude-haiku-4-5',
      max_tokens: 64,
      messages: [{ role: 'user' as const, content }],
    });
    const batch = await anthropic.messages.batches.create({
      requests: [
        { custom_id: 'fine', params: params('hello') },
        { custom_id: 'broken', params: params('oops [sim batch=error-500]') },
        { custom_id: 'late', params: params('slow [sim batch=expired]') },
      ],
    });
    expect(batch.processing_status).toBe('in_progress');
    await waitFor(
      'the batch to end',
      async () => (await anthropic.messages.batches.retrieve(batch.id)).processing_status === 'ended',
    );
    const results = new Map<string, string>();
    for await (const entry of await anthropic.messages.batches.results(batch.id))
      results.set(entry.custom_id, entry.result.type);
    expect(Object.fromEntries(results)).toEqual({ fine: 'succeeded', broken: 'errored', late: 'expired' });
    expect((await anthropic.messages.batches.retrieve(batch.id)).request_counts).toEqual({
      processing: 0,
      succeeded: 1,
      errored: 1,
      canceled: 0,
      expired: 1,
    });
    expect(simulator.batchStats().byProvider.anthropic).toEqual({ batchesCreated: 1, itemsAnswered: 1 });
  });

  it("refuses a custom_id outside Anthropic's rules", async () => {
    await expect(
      anthropic.messages.batches.create({
        requests: [
          {
            custom_id: 'doc/1.txt',
            params: { model: 'claude-haiku-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] },
          },
        ],
      }),
    ).rejects.toMatchObject({ status: 400 });
    expect(simulator.batchStats().batchesCreated).toBe(0);
  });
});

describe('route helpers', () => {
  it('maps task ids the providers would refuse to part-local custom_ids, and keeps the rest', () => {
    expect(customIdFor('item-7', 3)).toBe('item-7');
    expect(customIdFor('doc/7.txt', 3)).toBe('m-3');
    expect(customIdFor('m-12', 3)).toBe('m-3');
    expect(customIdFor('x'.repeat(65), 0)).toBe('m-0');
  });

  it('sends claude-* models to Anthropic and the rest to OpenAI', () => {
    expect(providerOfModel('claude-haiku-4-5')).toBe('anthropic');
    expect(providerOfModel('gpt-4o-mini')).toBe('openai');
  });

  it('parses CLI durations and refuses what is not one', () => {
    expect(parseDuration('24h')).toBe(86_400_000);
    expect(parseDuration('90m')).toBe(5_400_000);
    expect(parseDuration('1500')).toBe(1500);
    expect(() => parseDuration('soon')).toThrow('"soon" is not a duration');
  });

  it('resolves auto to provider-batch only for large batches whose deadline allows a day', () => {
    expect(resolveAutoRoute(5000, undefined)).toBe('provider-batch');
    expect(resolveAutoRoute(5000, 2 * 3_600_000)).toBe('sync');
    expect(resolveAutoRoute(10, 86_400_000)).toBe('sync');
  });
});
