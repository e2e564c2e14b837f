/**
 * `npm run bench` (or `tsx bench/claude-cache.ts`): what Anthropic's prompt cache saves a long agent on the native
 * path. One agent of BENCH_CLAUDE_STEPS model steps (default 50: a tool call on every step but the last, which
 * answers) on a simulated Claude model through the simulator's `/v1/messages`, with a ~3,000-token system prompt and
 * tools and ~400 tokens added per step (the tool's answer), run twice on one dev server and worker: `promptCache: "off"`
 * (no breakpoint) and the default (`5m`: breakpoints placed by anthropic-messages.ts). Each run's bill is the cost it
 * reports (the worker's price table), checked against the bill recomputed here from the provider's own usage (the
 * simulator's counts) at Anthropic's list price and cache ratios: reads 0.1x the input price, 5-minute writes 1.25x,
 * 1-hour writes 2x. Writes its section of docs/BENCHMARKS.md between `<!-- claude-cache:start -->` and
 * `<!-- claude-cache:end -->`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { z } from 'zod';
import { FanoutClient } from '../src/client/fanout-client';
import type { AgentTask, PromptCache } from '../src/contract/agent-task';
import type { TokenUsage } from '../src/contract/token-usage';
import { createAnthropicClient, createLlmClient } from '../src/llm/llm-client';
import { startDevServer } from '../src/local/dev-server';
import { BUILT_IN_PRICES } from '../src/pricing';
import { startSimulator, type SimulatedRequest } from '../src/sim/simulator';
import { defineTool } from '../src/tools/define-tool';
import { createFanoutWorker } from '../src/worker';

Runtime.install({ logger: new DefaultLogger('ERROR') });

const STEPS = Number(process.env.BENCH_CLAUDE_STEPS ?? 50);
const MODEL = 'claude-sonnet-4-5';
const SYSTEM_WORDS = 2980;
const NOTE_WORDS = 390;
/** Anthropic's prompt-cache prices as multiples of the input price (claude.com/pricing). */
const RATIO = { read: 0.1, write5m: 1.25, write1h: 2 } as const;

const readNote = defineTool({
  name: 'read_note',
  description: 'Reads the next note of the file',
  input: z.object({ note: z.number().int() }),
  run: ({ note }) => Array.from({ length: NOTE_WORDS }, (_, index) => `n${note}.${index}`).join(' '),
});

interface Row {
  label: string;
  promptCache: PromptCache;
  requests: number;
  breakpoints: number;
  usage: TokenUsage;
  /** What the run reports it cost (the worker's price table). */
  billUsd: number;
  seconds: number;
}

/**
 * The bill of one call from the usage the provider reported (the simulator's own counts) at the model's list price and
 * Anthropic's cache ratios, independently of the price table.
 */
function providerBill(call: SimulatedRequest): number {
  const price = BUILT_IN_PRICES[MODEL];
  const { totalTokens = 0, readTokens = 0, write5mTokens = 0, write1hTokens = 0 } = call.cache ?? {};
  const uncached = totalTokens - readTokens - write5mTokens - write1hTokens;
  const inputUnits = uncached + readTokens * RATIO.read + write5mTokens * RATIO.write5m + write1hTokens * RATIO.write1h;
  return (inputUnits * price.inputPerMillion + (call.usage?.completion_tokens ?? 0) * price.outputPerMillion) / 1e6;
}

async function main(): Promise<void> {
  const server = await startDevServer();
  const simulator = await startSimulator({ latency: { minMs: 5, maxMs: 5 } });
  const taskQueue = 'bench-claude-cache';
  const worker = await createFanoutWorker({
    connection: server.nativeConnection,
    taskQueue,
    tools: [readNote],
    activities: {
      llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'bench' }),
      anthropic: createAnthropicClient({ baseURL: simulator.anthropicBaseUrl, apiKey: 'bench' }),
    },
  });
  const running = worker.run();
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const rows: Row[] = [];
  try {
    for (const [label, promptCache] of [
      ['uncached (promptCache off)', 'off'],
      ['cached (promptCache 5m, the default)', '5m'],
    ] as const) {
      simulator.reset();
      const task: AgentTask = {
        id: `claude-${promptCache}`,
        model: MODEL,
        system: `You keep notes. ${Array.from({ length: SYSTEM_WORDS - 3 }, (_, index) => `rule${index}`).join(' ')}`,
        prompt: `Read the notes [[repeat ${STEPS - 1} tool:read_note {"note":1}]]`,
        tools: ['read_note'],
        maxSteps: STEPS,
        promptCache,
      };
      const startedAt = Date.now();
      const { results } = await (await client.startParallel([task])).result();
      const seconds = (Date.now() - startedAt) / 1000;
      const result = results[0];
      if (result.status !== 'ok' || result.steps !== STEPS || !result.usage)
        throw new Error(`${label}: ${result.status} after ${result.steps} steps: ${result.error?.message}`);
      const calls = simulator.log().filter((request: SimulatedRequest) => request.api === 'messages');
      const provider = {
        promptTokens: calls.reduce((sum, call) => sum + (call.cache?.totalTokens ?? 0), 0),
        cachedPromptTokens: calls.reduce((sum, call) => sum + (call.cache?.readTokens ?? 0), 0),
      };
      // The run reports what the provider counted.
      if (
        provider.promptTokens !== result.usage.promptTokens ||
        provider.cachedPromptTokens !== (result.usage.cachedPromptTokens ?? 0)
      )
        throw new Error(
          `${label}: the run reports ${JSON.stringify(result.usage)}, the provider ${JSON.stringify(provider)}`,
        );
      // And the cost it reports is the provider's bill.
      const billUsd = calls.reduce((sum, call) => sum + providerBill(call), 0);
      if (result.costUsd === undefined || Math.abs(result.costUsd - billUsd) > 1e-8)
        throw new Error(`${label}: the run reports $${result.costUsd}, the provider's usage bills $${billUsd}`);
      rows.push({
        label,
        promptCache,
        requests: calls.length,
        breakpoints: calls.reduce((sum, call) => sum + (call.cache?.breakpoints ?? 0), 0),
        usage: result.usage,
        billUsd: result.costUsd,
        seconds,
      });
      console.error(`claude-cache: ${label}: $${result.costUsd.toFixed(4)}, ${seconds.toFixed(1)} s`);
    }
  } finally {
    worker.shutdown();
    await running;
    await simulator.close();
    await server.stop();
  }
  const [uncached, cached] = rows;
  const number = (value: number | undefined) => (value ?? 0).toLocaleString('en-US');
  const table = rows
    .map(
      (row) =>
        `| ${row.label} | ${row.requests} | ${row.breakpoints} | ${number(row.usage.promptTokens)} | ${number(row.usage.cachedPromptTokens)} | ${number(row.usage.cacheWrite5mTokens)} | ${number(row.usage.promptTokens - (row.usage.cachedPromptTokens ?? 0) - (row.usage.cacheWrite5mTokens ?? 0) - (row.usage.cacheWrite1hTokens ?? 0))} | ${number(row.usage.completionTokens)} | $${row.billUsd.toFixed(4)} | ${((100 * row.billUsd) / uncached.billUsd).toFixed(1)}% | ${row.seconds.toFixed(1)} |`,
    )
    .join('\n');
  const share = (100 * cached.billUsd) / uncached.billUsd;
  const section = `## Claude's prompt cache on the native path

\`npx tsx bench/claude-cache.ts\` (part of \`npm run bench\`; BENCH_CLAUDE_STEPS), last run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC: one agent of ${STEPS} model steps on a simulated
\`${MODEL}\` through the simulator's Anthropic Messages API (\`/v1/messages\`), a ${SYSTEM_WORDS.toLocaleString('en-US')}-token system prompt plus
its tool, a tool call on every step but the last, each adding ~${NOTE_WORDS + 10} tokens (the call and its ${NOTE_WORDS}-word answer); the same
run with \`promptCache: "off"\` and with the default (\`5m\`), one after the other on one dev server and worker. Tokens
are the provider's own counts (the simulator's, equal to what the run reports); dollars are the cost the run reports
(the built-in price table: \`${MODEL}\` at $${BUILT_IN_PRICES[MODEL].inputPerMillion} / $${BUILT_IN_PRICES[MODEL].outputPerMillion} per million, cache reads 0.1x the input price,
5-minute writes 1.25x, 1-hour writes 2x), equal to the bill recomputed from the provider's usage at those rates.

| run | requests | breakpoints | input tokens | read from cache | written (5 min) | uncached input | output tokens | billed $ | of uncached | wall (s) |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${table}

Cached, the agent is billed ${share.toFixed(1)}% of the uncached run (the goal: at most 25%): every step after the first reads the whole
conversation the step before wrote, and pays full price only for what it adds (at 1.25x, as a write).`;
  const target = path.join(__dirname, '..', 'docs', 'BENCHMARKS.md');
  const existing = readFileSync(target, 'utf8');
  const block = `<!-- claude-cache:start -->\n${section}\n<!-- claude-cache:end -->`;
  const pattern = /<!-- claude-cache:start -->[\s\S]*?<!-- claude-cache:end -->/;
  writeFileSync(
    target,
    pattern.test(existing) ? existing.replace(pattern, block) : `${existing.trimEnd()}\n\n${block}\n`,
  );
  console.log(section);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
