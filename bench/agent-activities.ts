/**
 * What one agent step costs in the activities alone, ours against the plain loop's (bench/plain/activities.ts): the same
 * agents as compare.ts scenario g (five model steps, the first four asking for two tool calls), driven by this script
 * as each loop's workflow would drive them, in this process, against a simulator in its own process; no Temporal.
 *
 *   tsx bench/agent-activities.ts [--agents 50] [--rounds 3] [--step-ms 200] [--only ours,plain]
 *
 * Per model step: this process's CPU (user + system, every thread: the activities' own work, their file writes on the
 * thread pool, GC), the store's writes and reads, and the bytes of each activity's input and result as JSON (what
 * Temporal carries in history and between the worker's threads). Our activities run in `MockActivityEnvironment`
 * (no worker client: no watchdog, a heartbeat timer per call instead), so what the worker adds around an activity
 * (interceptors, the watchdog, the SDK) is not in these figures: compare.ts measures the whole worker.
 */
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createAgentActivities } from '../src/activities/agent';
import {
  toolCallSource,
  type AgentStepResult,
  type MessageEntry,
  type ToolCallResult,
} from '../src/contract/agent-loop';
import type { PayloadRef } from '../src/contract/payload-ref';
import { createLlmClient } from '../src/llm/llm-client';
import { pricesFromEnvironment } from '../src/pricing';
import { FileStorage, PayloadStore } from '../src/store';
import type { ObjectStorage } from '../src/store/object-storage';
import { ToolRegistry } from '../src/tools/registry';
import { wait } from './agents/wait-tool';
import { createPlainAgentActivities, type PlainMessage } from './plain/activities';
import { spawnSimulator } from './remote-simulator';
import { scratchDirectory } from './scratch';

const { values: flags } = parseArgs({
  options: {
    agents: { type: 'string', default: '50' },
    rounds: { type: 'string', default: '3' },
    'step-ms': { type: 'string', default: '200' },
    only: { type: 'string', default: 'ours,plain' },
  },
});
const AGENTS = Number(flags.agents);
const ROUNDS = Number(flags.rounds);
const STEPS = 5;
const prompt = (index: number) =>
  `Agent ${index}: wait twice, four times [[repeat 4 tool:wait {"ms":300}, tool:wait {"ms":300}]]`;

/** Counts what goes through a storage (writes, reads). */
function counting(storage: ObjectStorage, counts: { writes: number; reads: number }): ObjectStorage {
  return new Proxy(storage, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (property === 'write' || property === 'writeStream') counts.writes += 1;
        if (property === 'read' || property === 'readRange') counts.reads += 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

interface Figures {
  cpuMs: number;
  steps: number;
  writes: number;
  reads: number;
  bytes: Record<string, { count: number; bytes: number }>;
}

function note(figures: Figures, what: string, value: unknown): void {
  const entry = (figures.bytes[what] ??= { count: 0, bytes: 0 });
  entry.count += 1;
  entry.bytes += Buffer.byteLength(JSON.stringify(value));
}

async function ours(baseUrl: string, root: string): Promise<Figures> {
  const counts = { writes: 0, reads: 0 };
  const store = new PayloadStore(counting(new FileStorage(), counts), root);
  const activities = createAgentActivities({
    llm: createLlmClient({ baseURL: baseUrl, apiKey: 'bench' }),
    defaultModel: 'gpt-4o-mini',
    clock: () => performance.now(),
    heartbeatIntervalMs: 500,
    store,
    prices: pricesFromEnvironment(),
    tools: new ToolRegistry([wait]),
  });
  const figures: Figures = { cpuMs: 0, steps: 0, writes: 0, reads: 0, bytes: {} };
  const started = process.cpuUsage();
  await Promise.all(
    Array.from({ length: AGENTS }, async (_, index) => {
      const environment = new MockActivityEnvironment({
        workflowExecution: { workflowId: `bench-${Date.now()}-${index}`, runId: 'run' },
      });
      const task = { id: `agent-${index}`, prompt: prompt(index), tools: ['wait'] };
      let transcript: PayloadRef | undefined;
      let append: MessageEntry[] = [];
      for (let step = 1; step <= STEPS; step += 1) {
        const input = { task, step, ...(transcript ? { transcript } : {}), append, inlineOutputBytes: 16384 };
        note(figures, 'agentStep input', input);
        const result = (await environment.run(activities.agentStep, input)) as AgentStepResult;
        note(figures, 'agentStep result', result);
        figures.steps += 1;
        transcript = result.transcript;
        if (result.next !== 'tools') break;
        const results = await Promise.all(
          result.calls.map((call, callIndex) => {
            // As the agent workflow does (src/workflows/agent/tool-calls.ts).
            const toolInput = { taskId: task.id, step, index: callIndex, ...toolCallSource(result, call) };
            note(figures, 'toolCall input', toolInput);
            return environment.run(activities.toolCall, toolInput) as Promise<ToolCallResult>;
          }),
        );
        for (const done of results) note(figures, 'toolCall result', done);
        append = results.map((done) => done.message);
      }
    }),
  );
  const spent = process.cpuUsage(started);
  return { ...figures, cpuMs: (spent.user + spent.system) / 1000, ...counts };
}

async function plain(baseUrl: string): Promise<Figures> {
  const activities = createPlainAgentActivities(new OpenAI({ baseURL: baseUrl, apiKey: 'bench', maxRetries: 0 }));
  const figures: Figures = { cpuMs: 0, steps: 0, writes: 0, reads: 0, bytes: {} };
  const started = process.cpuUsage();
  await Promise.all(
    Array.from({ length: AGENTS }, async (_, index) => {
      const messages: PlainMessage[] = [{ role: 'user', content: prompt(index) }];
      for (let step = 1; step <= STEPS; step += 1) {
        note(figures, 'invokeModel input', messages);
        const reply = await activities.invokeModel(messages);
        note(figures, 'invokeModel result', reply);
        figures.steps += 1;
        messages.push(reply);
        if (!reply.tool_calls?.length) break;
        const results = await Promise.all(
          reply.tool_calls.map((call) => {
            note(figures, 'runTool input', call.function);
            return activities.runTool(call.function);
          }),
        );
        for (const [callIndex, content] of results.entries()) {
          note(figures, 'runTool result', content);
          messages.push({ role: 'tool', tool_call_id: reply.tool_calls[callIndex].id, content });
        }
      }
    }),
  );
  const spent = process.cpuUsage(started);
  return { ...figures, cpuMs: (spent.user + spent.system) / 1000 };
}

function report(name: string, figures: Figures): string {
  const perStep = (value: number) => (value / figures.steps).toFixed(2);
  const sizes = Object.entries(figures.bytes)
    .map(([what, { count, bytes }]) => `${what} ${(bytes / count).toFixed(0)} B`)
    .join(', ');
  return `${name}: ${perStep(figures.cpuMs)} ms CPU per model step; store writes ${perStep(figures.writes)}, reads ${perStep(figures.reads)} per step; ${sizes}`;
}

async function main(): Promise<void> {
  const only = new Set(flags.only.split(','));
  const simulator = await spawnSimulator(['--latency', flags['step-ms']]);
  const root = scratchDirectory('agent-activities-');
  try {
    for (let round = 0; round <= ROUNDS; round += 1) {
      // Round 0 warms both up (modules, connections, JIT) and is not reported.
      for (const name of round % 2 === 0 ? ['ours', 'plain'] : ['plain', 'ours']) {
        if (!only.has(name)) continue;
        const figures = name === 'ours' ? await ours(simulator.baseUrl, root) : await plain(simulator.baseUrl);
        if (round > 0) console.log(`round ${round} ${report(name, figures)}`);
      }
    }
  } finally {
    await simulator.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
