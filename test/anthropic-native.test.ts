import { writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { AgentTask } from '../src/contract/agent-task';
import { anthropicAsChat, anthropicRequest, usageOf } from '../src/llm/anthropic-messages';
import { deadlineSignal } from '../src/llm/cancellation';
import { usageFromChat } from '../src/llm/token-usage';
import { requestLine } from '../src/provider-batch/plan-parts';
import { readRateLimitHeaders } from '../src/pacing/rate-limit-headers';
import { anthropicUsageOf } from '../src/sim/anthropic-prompt-cache';
import type { SimulatedRequest } from '../src/sim/simulator';
import { useAgentStack } from './support/agents';
import { batchDirectory, readSink } from './support/batch-files';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

const suite = useAgentStack();

/** A system prompt of `words` simulator tokens, distinct per `name` so that no two tests share a cached prefix. */
const systemOf = (name: string, words: number) => `${name} ${'rule '.repeat(words - 1)}`.trim();

/** The requests the simulator's Messages API saw for a task, in order. */
function nativeCalls(taskId: string): SimulatedRequest[] {
  return suite.servers.simulator.log().filter((request) => request.taskId === taskId && request.outcome === 200);
}

/** The bill of a task recomputed from what the provider reported on each request (the simulator's own counts). */
function providerCounts(calls: SimulatedRequest[]) {
  const sum = (pick: (request: SimulatedRequest) => number) => calls.reduce((total, call) => total + pick(call), 0);
  return {
    promptTokens: sum((call) => call.cache?.totalTokens ?? 0),
    cachedPromptTokens: sum((call) => call.cache?.readTokens ?? 0),
    cacheWrite5mTokens: sum((call) => call.cache?.write5mTokens ?? 0),
    cacheWrite1hTokens: sum((call) => call.cache?.write1hTokens ?? 0),
  };
}

describe('Claude through the Messages API', () => {
  it("reads at every agent step the prefix the step before wrote, and reports the provider's cache counts", async () => {
    const task: AgentTask = {
      id: uniqueName('claude-agent'),
      model: 'claude-sonnet-4-5',
      system: systemOf('cached-agent', 1500),
      prompt: 'Dig [[repeat 4 tool:search {"q":"a"}, tool:fetch_page {"url":"b"}]]',
      tools: ['search', 'fetch_page'],
    };
    const { results } = await (await suite.stack.client.startParallel([task])).result();
    expect(results[0]).toMatchObject({ status: 'ok', steps: 5 });
    // Two calls a step (parallel), answered in order, through tool_use and tool_result blocks.
    expect(results[0].output).toContain('from 8 tool results: search found: a | fetch_page found: b');

    const calls = nativeCalls(task.id);
    expect(calls.map((call) => call.api)).toEqual(Array(5).fill('messages'));
    // System (after tools), the previous step's end (from step 2), the conversation's end.
    expect(calls.map((call) => call.cache?.breakpoints)).toEqual([2, 3, 3, 3, 3]);
    expect(calls[0].cache?.readTokens).toBe(0);
    for (let step = 1; step < calls.length; step += 1) {
      // Exactly the whole conversation of the step before, tools and system included.
      expect(calls[step].cache?.readTokens).toBe(calls[step - 1].cache?.totalTokens);
      expect(calls[step].cache?.write5mTokens).toBe(
        (calls[step].cache?.totalTokens ?? 0) - (calls[step].cache?.readTokens ?? 0),
      );
    }
    const counts = providerCounts(calls);
    expect(counts.cachedPromptTokens / counts.promptTokens).toBeGreaterThan(0.7);
    expect(results[0].usage).toMatchObject({
      promptTokens: counts.promptTokens,
      cachedPromptTokens: counts.cachedPromptTokens,
      cacheWrite5mTokens: counts.cacheWrite5mTokens,
    });
    expect(results[0].usage?.cacheWrite1hTokens).toBeUndefined();
  });

  it('writes for an hour with promptCache 1h, and marks no breakpoint with promptCache off', async () => {
    const base = {
      model: 'claude-sonnet-4-5',
      prompt: 'Look [[tool:search {"q":"x"}]]',
      tools: ['search'],
    };
    const hour: AgentTask = { ...base, id: uniqueName('hour'), system: systemOf('hour', 1200), promptCache: '1h' };
    const off: AgentTask = { ...base, id: uniqueName('off'), system: systemOf('off', 1200) };
    const handle = await suite.stack.client.startParallel([hour, off], { promptCache: 'off' });
    const { results } = await handle.result();
    expect(results.map((result) => result.status)).toEqual(['ok', 'ok']);

    const hourCalls = nativeCalls(hour.id);
    expect(hourCalls.every((call) => call.cache?.write5mTokens === 0)).toBe(true);
    expect(providerCounts(hourCalls).cacheWrite1hTokens).toBeGreaterThan(1200);
    const hourCounts = providerCounts(hourCalls);
    expect(results[0].usage).toMatchObject({
      promptTokens: hourCounts.promptTokens,
      cachedPromptTokens: hourCounts.cachedPromptTokens,
      cacheWrite1hTokens: hourCounts.cacheWrite1hTokens,
    });
    expect(results[0].usage).not.toHaveProperty('cacheWrite5mTokens');

    // The run's `off` applies to the task that sets nothing.
    const offCalls = nativeCalls(off.id);
    expect(offCalls.map((call) => call.cache)).toEqual(
      offCalls.map((call) => ({
        breakpoints: 0,
        totalTokens: call.cache?.totalTokens,
        readTokens: 0,
        write5mTokens: 0,
        write1hTokens: 0,
      })),
    );
    expect(results[1].usage).not.toHaveProperty('cachedPromptTokens');
    expect(results[1].usage).not.toHaveProperty('cacheWrite5mTokens');
  });

  it("caches a plain task's system prompt for the next task that shares it, and nothing below the minimum length", async () => {
    const system = systemOf('shared-plain', 1100);
    const tasks: AgentTask[] = [
      { id: uniqueName('first'), model: 'claude-sonnet-4-5', system, prompt: 'one' },
      { id: uniqueName('second'), model: 'claude-sonnet-4-5', system, prompt: 'two' },
      { id: uniqueName('short'), model: 'claude-sonnet-4-5', system: systemOf('short', 50), prompt: 'three' },
    ];
    // One at a time, so the second finds what the first wrote.
    const { results } = await (await suite.stack.client.startParallel(tasks, { maxParallel: 1 })).result();
    expect(results.map((result) => result.status)).toEqual(['ok', 'ok', 'ok']);
    const [first, second, short] = tasks.map((task) => nativeCalls(task.id)[0].cache);
    // One breakpoint, after the system prompt: a plain task has no next step to read its conversation.
    expect([first?.breakpoints, second?.breakpoints, short?.breakpoints]).toEqual([1, 1, 1]);
    expect(first).toMatchObject({ readTokens: 0, write5mTokens: 1100 });
    expect(second).toMatchObject({ readTokens: 1100, write5mTokens: 0 });
    expect(results[1].usage).toMatchObject({ cachedPromptTokens: 1100, promptTokens: second?.totalTokens });
    expect(short).toMatchObject({ readTokens: 0, write5mTokens: 0, write1hTokens: 0 });
    expect(results[2].usage).not.toHaveProperty('cacheWrite5mTokens');
  });

  it("bills cache reads at 0.1x input and writes at 1.25x (5 minutes) and 2x (1 hour), as recomputed from the provider's usage", async () => {
    const base = { model: 'claude-sonnet-4-5', prompt: 'Dig [[repeat 2 tool:search {"q":"a"}]]', tools: ['search'] };
    const tasks: AgentTask[] = [
      { ...base, id: uniqueName('bill-5m'), system: systemOf('bill-5m', 1300), promptCache: '5m' },
      { ...base, id: uniqueName('bill-1h'), system: systemOf('bill-1h', 1300), promptCache: '1h' },
    ];
    const { results } = await (await suite.stack.client.startParallel(tasks)).result();
    expect(results.map((result) => result.status)).toEqual(['ok', 'ok']);
    // claude-sonnet-4-5 (the built-in prices): $3 input, $15 output per million; reads $0.30, writes $3.75 / $6.
    const bill = (calls: SimulatedRequest[], read: number, write5m: number, write1h: number) =>
      calls.reduce((sum, call) => {
        // The usage the simulator's /v1/messages answered with, from its own cache counts.
        const usage = anthropicUsageOf(
          call.cache as NonNullable<SimulatedRequest['cache']>,
          call.usage?.completion_tokens ?? 0,
        );
        return (
          sum +
          (usage.input_tokens * 3 +
            usage.cache_read_input_tokens * read +
            usage.cache_creation.ephemeral_5m_input_tokens * write5m +
            usage.cache_creation.ephemeral_1h_input_tokens * write1h +
            usage.output_tokens * 15) /
            1e6
        );
      }, 0);
    for (const [index, task] of tasks.entries()) {
      const calls = nativeCalls(task.id);
      expect(calls).toHaveLength(3);
      const counts = providerCounts(calls);
      // Every rate is in the bill: the first step writes the prefix, the later ones read it and write their growth.
      expect(counts.cachedPromptTokens).toBeGreaterThan(2 * 1300);
      expect(task.promptCache === '5m' ? counts.cacheWrite5mTokens : counts.cacheWrite1hTokens).toBeGreaterThan(1300);
      expect(results[index].costUsd).toBeCloseTo(bill(calls, 0.3, 3.75, 6), 9);
      // Against the same tokens all billed as input: what the cache saved (reads) less what writing cost above input.
      expect((results[index].costUsd ?? NaN) + (results[index].cacheSavingsUsd ?? NaN)).toBeCloseTo(
        bill(calls, 3, 3, 3),
        9,
      );
    }
  });

  it('returns a validated structured answer from Claude', async () => {
    const output = { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] };
    const id = uniqueName('structured');
    const { results } = await (
      await suite.stack.client.startParallel([
        { id, model: 'claude-haiku-4-5', prompt: 'Name it [[invalid-json 1]] [[answer-json {"title":"x"}]]', output },
      ])
    ).result();
    expect(results[0]).toMatchObject({ status: 'ok', output: '{"title":"x"}', steps: 2 });
    expect(nativeCalls(id).map((call) => call.api)).toEqual(['messages', 'messages']);
  });

  it("sends a task of provider anthropic natively whatever its model's name, and waits out Anthropic's 429s in the attempt", async () => {
    suite.servers.simulator.configure({
      latency: { minMs: 20, maxMs: 20 },
      rateLimits: { requestsPerMinute: 60, burstSeconds: 1 },
    });
    try {
      const tasks: AgentTask[] = [1, 2, 3, 4].map((n) => ({
        id: uniqueName(`limited-${n}`),
        // A model of its own: the worker's pacer keeps what it learns of a model's limit.
        model: 'limited-model',
        provider: 'anthropic',
        prompt: `Count ${n === 1 ? '[sim fault=429 times=1 retry-after=1] ' : ''}${n}`,
      }));
      const { results } = await (await suite.stack.client.startParallel(tasks)).result();
      expect(results.map((result) => result.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
      const requests = suite.servers.simulator
        .log()
        .filter((request) => tasks.some((task) => task.id === request.taskId));
      expect(requests.every((request) => request.api === 'messages')).toBe(true);
      expect(requests.filter((request) => request.outcome === 200)).toHaveLength(4);
      expect(requests.filter((request) => request.outcome === 429).length).toBeGreaterThan(0);
      expect(requests.every((request) => request.attempt === 1)).toBe(true);
    } finally {
      suite.servers.simulator.configure({ latency: { minMs: 20, maxMs: 20 } });
    }
  });
});

describe('the request sent to Anthropic', () => {
  const tools = [
    { type: 'function' as const, function: { name: 'search', description: 'finds', parameters: { type: 'object' } } },
  ];
  const step1: ChatCompletionMessageParam[] = [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: 'find it' },
  ];
  const step2: ChatCompletionMessageParam[] = [
    ...step1,
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'toolu_1', type: 'function', function: { name: 'search', arguments: '{"q":"a","n":1}' } },
        { id: 'toolu_2', type: 'function', function: { name: 'search', arguments: '{"q":"b"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'toolu_1', content: 'A' },
    { role: 'tool', tool_call_id: 'toolu_2', content: 'B' },
    { role: 'user', content: 'Go on.' },
  ];
  const request = (messages: ChatCompletionMessageParam[]) =>
    anthropicRequest({ model: 'claude-sonnet-4-5', messages, tools }, '5m');
  const withoutBreakpoints = (value: unknown) =>
    JSON.stringify(value).replaceAll(',"cache_control":{"type":"ephemeral"}', '');

  it('translates tool calls to tool_use blocks and their results to one user turn of tool_result blocks', () => {
    expect(request(step2).messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'find it', cache_control: { type: 'ephemeral' } }] },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 'toolu_1', name: 'search', input: { q: 'a', n: 1 } },
          { type: 'tool_use', id: 'toolu_2', name: 'search', input: { q: 'b' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: 'A' },
          { type: 'tool_result', tool_use_id: 'toolu_2', content: 'B' },
          { type: 'text', text: 'Go on.', cache_control: { type: 'ephemeral' } },
        ],
      },
    ]);
    expect(request(step2).system).toEqual([{ type: 'text', text: 'be brief', cache_control: { type: 'ephemeral' } }]);
  });

  it("is byte-stable: the same transcript is the same bytes, and a step's request begins with the step before's", () => {
    expect(JSON.stringify(request(step2))).toBe(JSON.stringify(request(structuredClone(step2))));
    const before = withoutBreakpoints(request(step1).messages);
    const after = withoutBreakpoints(request(step2).messages);
    expect(after.startsWith(before.slice(0, -1))).toBe(true);
    expect(withoutBreakpoints(request(step1).system)).toBe(withoutBreakpoints(request(step2).system));
  });

  it("reads Anthropic's rate-limit headers as the pacer's readings", () => {
    const now = Date.parse('2026-12-06T10:00:00Z');
    const headers = new Headers({
      'anthropic-ratelimit-requests-limit': '50',
      'anthropic-ratelimit-requests-remaining': '49',
      'anthropic-ratelimit-requests-reset': '2026-12-06T10:00:01Z',
      'anthropic-ratelimit-tokens-limit': '40000',
      'anthropic-ratelimit-tokens-remaining': '39000',
      'anthropic-ratelimit-tokens-reset': '2026-12-06T10:00:02.5Z',
    });
    expect(readRateLimitHeaders(headers, now)).toEqual({
      requests: { limit: 50, remaining: 49, resetMs: 1000 },
      tokens: { limit: 40000, remaining: 39000, resetMs: 2500 },
    });
  });
});

describe("Anthropic's Message Batches with a shared system prompt", () => {
  it('mark the system prompt for an hour, and items read what the first to finish wrote', async () => {
    const simulator = suite.servers.simulator;
    // Haiku's minimum cacheable length is 2,048 tokens: this simulator's setting lowers it for the 1,100-token prompt.
    simulator.configure({
      latency: { minMs: 20, maxMs: 20 },
      cacheMinimumTokens: 1024,
      providerBatches: { speed: 100, processingSeconds: { min: 100, max: 100 } },
    });
    try {
      const system = systemOf('batch-shared', 1100);
      const requests = [0, 1, 2].map((index) => {
        const line = JSON.parse(
          requestLine(
            { id: `item-${index}`, system, prompt: `question ${index}` },
            'claude-haiku-4-5',
            'anthropic',
            '/v1/chat/completions',
            `item-${index}`,
            64,
          ),
        ) as { custom_id: string; params: Anthropic.Messages.MessageCreateParamsNonStreaming };
        return line;
      });
      expect(requests[0].params.system).toEqual([
        { type: 'text', text: system, cache_control: { type: 'ephemeral', ttl: '1h' } },
      ]);
      const anthropic = new Anthropic({ apiKey: 'test-key', baseURL: simulator.anthropicBaseUrl, maxRetries: 0 });
      const batch = await anthropic.messages.batches.create({ requests });
      await waitFor(
        'the batch to end',
        async () => (await anthropic.messages.batches.retrieve(batch.id)).processing_status === 'ended',
      );
      const usages: Anthropic.Messages.Usage[] = [];
      for await (const entry of await anthropic.messages.batches.results(batch.id))
        if (entry.result.type === 'succeeded') usages.push(entry.result.message.usage);
      expect(usages).toHaveLength(3);
      const writes = usages.filter((usage) => usage.cache_creation?.ephemeral_1h_input_tokens === 1100);
      const reads = usages.filter((usage) => usage.cache_read_input_tokens === 1100);
      expect([writes.length, reads.length]).toEqual([1, 2]);
      // What the run reports of an item: every input token, of which the cache's.
      expect(usageFromChat(usageOf(reads[0], '1h'))).toMatchObject({
        promptTokens: 1100 + reads[0].input_tokens,
        cachedPromptTokens: 1100,
      });
      expect(usageFromChat(usageOf(writes[0], '1h'))).toMatchObject({ cacheWrite1hTokens: 1100 });
    } finally {
      simulator.configure({ latency: { minMs: 20, maxMs: 20 } });
    }
  });
});

describe('a Claude request aborted as its answer arrives', () => {
  let server: http.Server;
  let abortOnAnswer: AbortController | undefined;

  beforeAll(async () => {
    server = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(
          JSON.stringify({
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            model: 'claude-sonnet-4-5',
            content: [{ type: 'text', text: 'the answer' }],
            stop_reason: 'end_turn',
            stop_sequence: null,
            usage: { input_tokens: 1, output_tokens: 2 },
          }),
        );
        abortOnAnswer?.abort(new Error('cancelled'));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('keeps the answer (paid for) when the abort comes after it arrived, as an OpenAI call does', async () => {
    abortOnAnswer = new AbortController();
    const request = deadlineSignal(abortOnAnswer.signal, 10_000, { afterArrived: true });
    const client = new Anthropic({
      apiKey: 'k',
      baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      maxRetries: 0,
    });
    const { data } = await anthropicAsChat(
      client,
      { model: 'claude-sonnet-4-5', messages: [{ role: 'user', content: 'q' }] },
      '5m',
      { signal: request.signal, timeout: 10_000 },
    );
    request.clear();
    expect(abortOnAnswer.signal.aborted).toBe(true);
    expect(data.choices[0].message.content).toBe('the answer');
  });
});

describe('a batch of Claude items sharing a system prompt, on the sync route', () => {
  it('marks the shared prefix for an hour by default, and the items after the first read it', async () => {
    const directory = batchDirectory();
    const system = systemOf('batch-sync', 1200);
    const source = path.join(directory, 'claude.jsonl');
    writeFileSync(
      source,
      [0, 1, 2, 3, 4, 5]
        .map((index) => JSON.stringify({ id: `c-${index}`, model: 'claude-sonnet-4-5', system, prompt: `q ${index}` }))
        .join('\n') + '\n',
    );
    const sink = path.join(directory, 'claude-out.jsonl');
    const batchId = uniqueName('claude-batch');
    // One call at a time, so every item after the first finds the prefix written.
    const handle = await suite.stack.client.startBatch({ source, sink, batchId, options: { concurrency: 1 } });
    await handle.result();
    const lines = readSink(sink);
    expect(lines.map((line) => line.status)).toEqual(Array(6).fill('ok'));
    const calls = suite.servers.simulator.log().filter((request) => request.workflowId === batchId);
    expect(calls.map((call) => call.api)).toEqual(Array(6).fill('messages'));
    expect(calls.map((call) => [call.cache?.breakpoints, call.cache?.write1hTokens, call.cache?.readTokens])).toEqual([
      [1, 1200, 0],
      ...Array(5).fill([1, 0, 1200]),
    ]);
    const byId = new Map(lines.map((line) => [line.id, line]));
    expect(byId.get('c-0')?.usage).toMatchObject({ cacheWrite1hTokens: 1200 });
    expect(byId.get('c-5')?.usage).toMatchObject({ cachedPromptTokens: 1200 });
  });
});
