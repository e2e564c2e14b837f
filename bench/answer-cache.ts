/**
 * The answer cache across runs (issue 32, point 4; run by `npm run bench`): the batch (10,000 items over 20
 * different 2,000-token system prompts, shuffled, 150-token questions) run once under `--cache read-write`, then run
 * again with 1% of its prompts edited, side by side in one run. Counts the provider's requests per run at the
 * simulator (in its own process, calls of 1-3 s), and compares dollars and wall. Goals: calls of the re-run equal to the
 * edited items exactly, dollars at most 1.5% and wall at most 20% of the first run's. Writes its section of
 * docs/BENCHMARKS.md between `<!-- answer-cache:start -->` and `<!-- answer-cache:end -->`.
 *
 * `tsx bench/answer-cache.ts [--items N] [--concurrency C]` (defaults 10000 and 100).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createLlmClient } from '../src/llm/llm-client';
import { FanoutClient } from '../src/client/fanout-client';
import type { BatchSummary } from '../src/contract/batch';
import { startDevServer } from '../src/local/dev-server';
import { createFanoutWorker } from '../src/worker';
import { spawnSimulator } from './remote-simulator';
import { scratchDirectory } from './scratch';

Runtime.install({ logger: new DefaultLogger('ERROR') });

function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  return at < 0 ? fallback : Number(process.argv[at + 1]);
}

const ITEMS = flag('items', 10_000);
const CONCURRENCY = flag('concurrency', 100);
/** Different system prompts, each about 2,000 tokens (some 8,000 characters). */
const SYSTEM_PROMPTS = 20;
const EDITED = Math.max(1, Math.round(ITEMS / 100));
const LATENCY = '1000-3000';

const directory = scratchDirectory('fanout-bench-cache-');
// The worker's payload store (and so the cache's default home) in the benchmark's own directory.
process.env.FANOUT_STORE = path.join(directory, 'store');

/** System prompt `n` of SYSTEM_PROMPTS: a handbook of some 2,000 tokens. */
function systemPrompt(n: number): string {
  const paragraph = `Handbook ${n}, section on reviews: answer from the documents given, cite the quarter, keep to three points, and say when the figures disagree. `;
  return paragraph.repeat(60);
}

/** A question of some 150 tokens about item `index`. */
function prompt(index: number, edited: boolean): string {
  const context = `Quarterly report ${index}: revenue grew in three regions, costs rose with the new data centre, and the board asked for a plan. `;
  return `${context.repeat(4)}Question ${index}: what are the three main risks${edited ? ', ranked by likelihood' : ''}?`;
}

/** Which system prompt item `index` uses: shuffled over the file (a fixed permutation, the same in both runs). */
function systemOf(index: number): number {
  return (index * 7919 + 13) % SYSTEM_PROMPTS;
}

function writeTasks(name: string, edited: ReadonlySet<number>): string {
  const file = path.join(directory, `${name}.jsonl`);
  const lines = Array.from({ length: ITEMS }, (_, index) =>
    JSON.stringify({
      id: `q-${index}`,
      system: systemPrompt(systemOf(index)),
      prompt: prompt(index, edited.has(index)),
    }),
  );
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

interface Measured {
  wallMs: number;
  calls: number;
  summary: BatchSummary;
}

async function main(): Promise<void> {
  const server = await startDevServer();
  const simulator = await spawnSimulator(['--latency', LATENCY]);
  const taskQueue = 'bench-answer-cache';
  const worker = await createFanoutWorker({
    connection: server.nativeConnection,
    taskQueue,
    activities: { llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'bench' }) },
  });
  const running = worker.run();
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const cache = { mode: 'read-write' as const, location: path.join(directory, 'cache') };
  // Every 100th item, spread over the file.
  const edited = new Set(Array.from({ length: EDITED }, (_, index) => Math.floor((index * ITEMS) / EDITED) + 7));
  const measure = async (name: string, source: string): Promise<Measured> => {
    const startedAt = performance.now();
    const handle = await client.startBatch({
      source,
      sink: path.join(directory, `${name}.out.jsonl`),
      batchId: `bench-cache-${name}-${Date.now()}`,
      options: { concurrency: CONCURRENCY, cache },
    });
    const summary = await handle.result();
    const wallMs = performance.now() - startedAt;
    const calls = (await simulator.log()).filter((request) => request.workflowId === handle.batchId).length;
    console.error(`${name}: ${wallMs.toFixed(0)} ms, ${calls} provider calls, $${summary.cost?.usd}`);
    return { wallMs, calls, summary };
  };
  let first: Measured;
  let again: Measured;
  const loadAtStart = os.loadavg()[0];
  try {
    first = await measure('first', writeTasks('first', new Set()));
    again = await measure('edited', writeTasks('edited', edited));
  } finally {
    worker.shutdown();
    await running;
    await simulator.close();
    await server.stop();
  }
  const loadAtEnd = os.loadavg()[0];
  const usd = (run: Measured) => run.summary.cost?.usd ?? 0;
  const dollarsShare = usd(again) / usd(first);
  const wallShare = again.wallMs / first.wallMs;
  const verdict = (holds: boolean) => (holds ? 'met' : '**not met**');
  const table = [
    '| run | provider calls | wall (ms) | billed ($) | answered from the cache | saved ($) |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    `| first, ${ITEMS.toLocaleString('en-US')} items | ${first.calls} | ${first.wallMs.toFixed(0)} | ${usd(first).toFixed(6)} | ${first.summary.cost?.cachedCalls ?? 0} | ${(first.summary.cost?.savedUsd ?? 0).toFixed(6)} |`,
    `| again, ${EDITED} prompts edited | ${again.calls} | ${again.wallMs.toFixed(0)} | ${usd(again).toFixed(6)} | ${again.summary.cost?.cachedCalls ?? 0} | ${(again.summary.cost?.savedUsd ?? 0).toFixed(6)} |`,
  ].join('\n');
  const section = `## Answer cache: a batch re-run with 1% of its prompts edited

Command: \`tsx bench/answer-cache.ts\` (in \`npm run bench\`). Run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${os.cpus().length} cores, Node ${process.version}, load average ${loadAtStart.toFixed(1)} at the start and ${loadAtEnd.toFixed(1)} at the end.
A ${ITEMS.toLocaleString('en-US')}-item batch (${SYSTEM_PROMPTS} system prompts of about 2,000 tokens, shuffled over the items, and questions of about 150 tokens; gpt-4o-mini at the built-in prices), concurrency ${CONCURRENCY}, calls of
${LATENCY.replace('-', '-')} ms spread per item (the simulator in its own process), the worker in the benchmark's process, its store and the cache
on the local disk; run once under \`--cache read-write\`, then again (a new batch, the same ids) with ${EDITED} prompts edited, one after the other.

${table}

| goal | measured | |
| --- | ---: | --- |
| provider calls of the re-run = edited items (${EDITED}) | ${again.calls} | ${verdict(again.calls === EDITED)} |
| dollars of the re-run at most 1.5% of the first | ${(dollarsShare * 100).toFixed(2)}% | ${verdict(dollarsShare <= 0.015)} |
| wall of the re-run at most 20% of the first | ${(wallShare * 100).toFixed(1)}% | ${verdict(wallShare <= 0.2)} |

The re-run's wall is its edited calls (1-3 s, side by side) plus the batch's own start, scan, windows and the sink's assembly; its
${ITEMS - EDITED} other items are each one read of a stored entry, checked against its digest, in the lanes.`;
  const target = path.join(__dirname, '..', 'docs', 'BENCHMARKS.md');
  const block = `<!-- answer-cache:start -->\n${section}\n<!-- answer-cache:end -->`;
  const existing = readFileSync(target, 'utf8');
  const pattern = /<!-- answer-cache:start -->[\s\S]*?<!-- answer-cache:end -->/;
  writeFileSync(
    target,
    pattern.test(existing) ? existing.replace(pattern, () => block) : `${existing.trimEnd()}\n\n${block}\n`,
  );
  console.error('wrote the answer cache section of docs/BENCHMARKS.md');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
