import path from 'node:path';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { z } from 'zod';
import type { AnswerCacheSettings, CacheMode } from '../src/contract/answer-cache';
import type { AgentTask } from '../src/contract/agent-task';
import { defineTool } from '../src/tools/define-tool';
import { modelCalls, useAgentStack } from './support/agents';
import { uniqueName } from './support/test-stack';

const runs = { lookup: 0, stamp: 0 };

/** A tool whose result depends on its input alone: it opts in to the cache. */
const lookup = defineTool({
  name: 'cached_lookup',
  description: 'Looks a word up',
  input: z.object({ word: z.string() }),
  cache: true,
  run: ({ word }) => {
    runs.lookup += 1;
    return `${word} means something`;
  },
});

/** A tool with a side effect: it runs every time, whatever the cache. */
const stamp = defineTool({
  name: 'uncached_stamp',
  description: 'Stamps a document',
  input: z.object({}),
  run: () => {
    runs.stamp += 1;
    return 'stamped';
  },
});

const suite = useAgentStack({ tools: [lookup, stamp] });
const location = path.join(mkdtempSync(path.join(os.tmpdir(), 'fanout-cache-agents-')), 'cache');
const cache = (mode: CacheMode): AnswerCacheSettings => ({ mode, location });

async function runAgent(task: AgentTask, mode: CacheMode) {
  const handle = await suite.stack.client.startParallel(
    [task],
    { cache: cache(mode) },
    { workflowId: uniqueName('cached-agent') },
  );
  return (await handle.result()).results[0];
}

it("answers an agent's model steps from the cache, and runs again only the tools that did not opt in", async () => {
  const task: AgentTask = {
    id: 'cached-agent',
    prompt: 'define and stamp [[tool:cached_lookup {"word":"durable"}, tool:uncached_stamp {}]]',
    tools: ['cached_lookup', 'uncached_stamp'],
  };
  const first = await runAgent(task, 'read-write');
  expect(first).toMatchObject({ status: 'ok', steps: 2 });
  expect(modelCalls(suite.servers.simulator, task.id)).toHaveLength(2);
  expect(runs).toEqual({ lookup: 1, stamp: 1 });

  const again = await runAgent(task, 'read-write');
  expect(again).toMatchObject({ status: 'ok', steps: 2, output: first.output, costUsd: 0 });
  // Both model steps answered from the cache (the second step's request holds the same tool results, so the same key).
  expect(modelCalls(suite.servers.simulator, task.id)).toHaveLength(2);
  expect(runs).toEqual({ lookup: 1, stamp: 2 });

  const replayed = await runAgent(task, 'replay');
  expect(replayed).toMatchObject({ status: 'ok', output: first.output });
  expect(modelCalls(suite.servers.simulator, task.id)).toHaveLength(2);
  expect(runs).toEqual({ lookup: 1, stamp: 3 });

  // A model step the cache does not hold fails the agent under replay, CacheMiss, naming the step.
  const unrecorded = await runAgent({ ...task, prompt: `${task.prompt} (reworded)` }, 'replay');
  expect(unrecorded).toMatchObject({ status: 'failed', error: { type: 'CacheMiss' } });
  expect(unrecorded.error?.message).toContain('agent "cached-agent" step 1');
  expect(modelCalls(suite.servers.simulator, task.id)).toHaveLength(2);
});

it("gives a batch's answer cache to the agents among its items: a re-run sends none of their steps", async () => {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'fanout-cache-agent-batch-'));
  const source = path.join(directory, 'tasks.jsonl');
  const agentTask = {
    id: 'batch-agent',
    prompt: 'look it up [[tool:cached_lookup {"word":"lane"}]]',
    tools: ['cached_lookup'],
  };
  writeFileSync(
    source,
    `${JSON.stringify(agentTask)}\n${JSON.stringify({ id: 'batch-plain', prompt: 'plain item' })}\n`,
  );
  const runBatch = async (name: string) => {
    const handle = await suite.stack.client.startBatch({
      source,
      sink: path.join(directory, `${name}.jsonl`),
      options: { concurrency: 2, cache: cache('read-write') },
    });
    return handle.result();
  };
  const first = await runBatch('first');
  expect(first).toMatchObject({ total: 2, succeeded: 2 });
  const sent = modelCalls(suite.servers.simulator, 'batch-agent').length;
  expect(sent).toBe(2);
  const lookups = runs.lookup;
  const again = await runBatch('again');
  expect(again).toMatchObject({ total: 2, succeeded: 2 });
  expect(modelCalls(suite.servers.simulator, 'batch-agent')).toHaveLength(sent);
  expect(modelCalls(suite.servers.simulator, 'batch-plain')).toHaveLength(1);
  expect(runs.lookup).toBe(lookups);
});
