/**
 * `npm run bench` (or `tsx bench/agents.ts`): what a long agent costs in history and in billable actions, with messages
 * in the payload store (the product's `agent` workflow: steps carry references) beside the same loop with the
 * transcript passed inline in every step's input and result (bench/agents/workflows.ts `inlineAgent`).
 *
 * Each agent calls a tool on every step (`read_page`, returning BENCH_AGENT_PAGE_WORDS words, default 500) and
 * answers after its last. Runs on a dev server with its metrics on, whose `action` counter is what Temporal Cloud
 * bills. Also runs a 100-step agent whose conversation reaches about 200,000 tokens (2,000-word pages), by reference
 * only. Writes its section of docs/BENCHMARKS.md between `<!-- agents:start -->` and `<!-- agents:end -->`.
 *
 * Env: BENCH_AGENT_STEPS (default 50), BENCH_AGENT_PAGE_WORDS (default 500).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import * as proto from '@temporalio/proto';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { z } from 'zod';
import { createLlmClient } from '../src/llm/llm-client';
import { startSimulator } from '../src/sim/simulator';
import { FileStorage, PayloadStore } from '../src/store';
import { defineTool } from '../src/tools/define-tool';
import { createFanoutWorker } from '../src/worker';
import { settledActions, startMeteredServer, total, type MeteredServer } from '../test/support/metered-server';
import { scratchDirectory } from './scratch';

Runtime.install({ logger: new DefaultLogger('ERROR') });

const STEPS = Number(process.env.BENCH_AGENT_STEPS ?? 50);
const PAGE_WORDS = Number(process.env.BENCH_AGENT_PAGE_WORDS ?? 500);
const TASK_QUEUE = 'bench-agents';

const readPage = defineTool({
  name: 'read_page',
  description: 'Reads a page',
  input: z.object({ page: z.number().int(), words: z.number().int() }),
  run: ({ page, words }) => Array.from({ length: words }, (_, index) => `w${page}.${index}`).join(' '),
});

interface Row {
  label: string;
  steps: number;
  runs: number;
  events: number;
  historyBytes: number;
  largestEventBytes: number;
  actions: number;
  /** Words of tool output in the conversation the last model call is sent (the simulator counts a word as a token). */
  conversationWords: number;
  seconds: number;
}

/** A run's events, a few per page: a page of an inline transcript's history can pass the client's 4 MB message limit. */
async function eventsOf(
  server: MeteredServer,
  workflowId: string,
  runId: string | undefined,
): Promise<proto.temporal.api.history.v1.IHistoryEvent[]> {
  const events: proto.temporal.api.history.v1.IHistoryEvent[] = [];
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await server.client.workflowService.getWorkflowExecutionHistory({
      namespace: 'default',
      execution: { workflowId, ...(runId === undefined ? {} : { runId }) },
      maximumPageSize: 20,
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    events.push(...(page.history?.events ?? []));
    nextPageToken = page.nextPageToken && page.nextPageToken.length > 0 ? page.nextPageToken : undefined;
  } while (nextPageToken);
  return events;
}

/** Every run of a workflow's continue-as-new chain: its histories' events and encoded bytes. */
async function chainSize(
  server: MeteredServer,
  handle: WorkflowHandle,
): Promise<{ runs: number; events: number; bytes: number; largestEvent: number }> {
  const size = { runs: 0, events: 0, bytes: 0, largestEvent: 0 };
  let runId: string | undefined;
  do {
    const events = await eventsOf(server, handle.workflowId, runId);
    size.runs += 1;
    size.events += events.length;
    for (const event of events) {
      const bytes = proto.temporal.api.history.v1.HistoryEvent.encode(
        proto.temporal.api.history.v1.HistoryEvent.fromObject(event),
      ).finish().length;
      size.bytes += bytes;
      size.largestEvent = Math.max(size.largestEvent, bytes);
    }
    runId = events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  } while (runId);
  return size;
}

async function runAgent(
  server: MeteredServer,
  label: string,
  type: 'agent' | 'inlineAgent',
  steps: number,
  pageWords: number,
): Promise<Row> {
  const directive = `[[repeat ${steps} tool:read_page {"page":1,"words":${pageWords}}]]`;
  const task = {
    id: `${type}-${steps}`,
    prompt: `Read every page ${directive}`,
    tools: ['read_page'],
    maxSteps: steps + 1,
  };
  const before = await settledActions(server);
  const startedAt = Date.now();
  const handle = await server.client.workflow.start(type, {
    taskQueue: TASK_QUEUE,
    workflowId: `bench-${type}-${steps}-${Date.now()}`,
    args: [{ task, inlineOutputBytes: 16_384 }],
  });
  const outcome = (await handle.result()) as { steps: number; status?: string };
  const seconds = (Date.now() - startedAt) / 1000;
  if (outcome.steps !== steps + 1) throw new Error(`${label}: ${outcome.steps} steps, expected ${steps + 1}`);
  const actions = total(await settledActions(server), before);
  const size = await chainSize(server, handle);
  return {
    label,
    steps: outcome.steps,
    runs: size.runs,
    events: size.events,
    historyBytes: size.bytes,
    largestEventBytes: size.largestEvent,
    actions,
    conversationWords: steps * pageWords,
    seconds,
  };
}

const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;

async function main(): Promise<void> {
  const server = await startMeteredServer();
  const simulator = await startSimulator({ latency: { minMs: 5, maxMs: 5 } });
  const storeRoot = scratchDirectory('fanout-bench-agents-');
  const worker = await createFanoutWorker({
    connection: server.nativeConnection,
    taskQueue: TASK_QUEUE,
    tools: [readPage],
    activities: {
      llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'bench' }),
      store: new PayloadStore(new FileStorage(), storeRoot),
    },
    workerOptions: { workflowsPath: require.resolve('./agents/workflows') },
  });
  const running = worker.run();
  const rows: Row[] = [];
  try {
    for (const [label, type, steps, words] of [
      [`${STEPS} tool steps, messages by reference`, 'agent', STEPS, PAGE_WORDS],
      [`${STEPS} tool steps, transcript inline`, 'inlineAgent', STEPS, PAGE_WORDS],
      ['100 tool steps of 2,000-word pages, by reference', 'agent', 100, 2000],
    ] as const) {
      simulator.reset();
      const row = await runAgent(server, label, type, steps, words);
      rows.push(row);
      console.error(
        `agents: ${label}: ${kb(row.historyBytes)} history, ${row.events} events, ${row.actions} actions, ${row.seconds.toFixed(1)} s`,
      );
    }
  } finally {
    worker.shutdown();
    await running;
    await simulator.close();
    await server.stop();
  }
  const table = rows
    .map(
      (row) =>
        `| ${row.label} | ${row.steps} | ${row.runs} | ${row.events} | ${kb(row.historyBytes)} | ${kb(row.historyBytes / row.steps)} | ${kb(row.largestEventBytes)} | ${row.actions} | ${(row.actions / row.steps).toFixed(2)} | ${row.conversationWords.toLocaleString('en-US')} | ${row.seconds.toFixed(1)} |`,
    )
    .join('\n');
  const [byRef, inline] = rows;
  const section = `## Agents: history and actions per step

\`npx tsx bench/agents.ts\` (part of \`npm run bench\`; BENCH_AGENT_STEPS, BENCH_AGENT_PAGE_WORDS): an agent that calls a tool
(\`read_page\`, ${PAGE_WORDS} words a page) on each of ${STEPS} steps, then answers, on a dev server with its metrics on (actions are its own
\`action\` counter, what Temporal Cloud bills), against the simulator. "By reference" is the \`agent\` workflow: messages in the
payload store by content hash, a step's input and result carry references. "Inline" is the same loop with the transcript
in every step's input and result (bench/agents/workflows.ts), as integrations that copy the conversation into each model
call do. A step is one model call; the last one answers.

| agent | model steps | runs (continue-as-new) | events | history | history per step | largest event | actions | actions per step | tool output in the last call (words = simulator tokens) | wall (s) |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${table}

By reference, history grows by a constant per step (${kb(byRef.historyBytes / byRef.steps)}); inline it grows with the conversation, so its total grows
with the square of the steps (${(inline.historyBytes / byRef.historyBytes).toFixed(1)} x here, and its largest event is the last step's whole transcript).
Actions are the same either way (${(byRef.actions / byRef.steps).toFixed(2)} vs ${(inline.actions / inline.steps).toFixed(2)} per step: a workflow start, then an activity
start per model step and per tool call); what the store saves is history, not actions. The 100-step agent's
conversation is about 200,000 tokens at its last step, and its history stays far under Temporal's limits.`;
  const target = path.join(__dirname, '..', 'docs', 'BENCHMARKS.md');
  const existing = readFileSync(target, 'utf8');
  const block = `<!-- agents:start -->\n${section}\n<!-- agents:end -->`;
  const pattern = /<!-- agents:start -->[\s\S]*?<!-- agents:end -->/;
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
