import { mkdtempSync, readdirSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import type { AgentResult } from '../src/contract/agent-task';
import { runCli } from './support/processes';
import { useTestStack } from './support/suite-stack';
import { uniqueName } from './support/test-stack';

// Every client, worker and CLI process of this file shares one store directory, as they would share FANOUT_STORE.
const store = mkdtempSync(path.join(tmpdir(), 'fanout-store-'));
process.env.FANOUT_STORE = store;
const directory = mkdtempSync(path.join(tmpdir(), 'fanout-large-'));

/** ~20 KB answers: 3,400 simulated words of about six bytes. */
const ANSWER_WORDS = 3400;

const suite = useTestStack({
  simulator: { latency: { minMs: 5, maxMs: 40 }, completionTokens: { min: ANSWER_WORDS, max: ANSWER_WORDS } },
});

/** The events of a workflow's history as the plain Temporal CLI prints them. */
function historyText(workflowId: string): string {
  return execFileSync(
    process.env.TEMPORAL_CLI as string,
    ['workflow', 'show', '--workflow-id', workflowId, '--address', suite.servers.server.address, '--output', 'json'],
    {
      encoding: 'utf8',
      maxBuffer: 512 * 1024 * 1024,
    },
  );
}

describe('payloads larger than history allows', () => {
  it('completes a fan-out of 1,000 tasks with 20 KB answers, and `fanout results` prints every answer in full', async () => {
    const tasks = Array.from({ length: 1000 }, (_, index) => ({ id: `t${index}`, prompt: `answer ${index}` }));
    const handle = await suite.stack.client.startParallel(tasks, { maxParallel: 200 });
    const result = await handle.result();
    expect(result.metrics.succeeded).toBe(1000);
    expect(result.results.every((agent) => (agent.output ?? '').length > 19_000)).toBe(true);
    expect(result.results.map((agent) => agent.id)).toEqual(tasks.map((task) => task.id));

    // What Temporal stored holds references, not answers: the history is a small fraction of the 20 MB of output.
    const history = historyText(handle.workflowId);
    expect(history.length).toBeLessThan(4_000_000);
    expect(history).not.toContain('lorem lorem lorem lorem');

    const { code, stdout, stderr } = await runCli(['results', handle.workflowId, '--jsonl', ...suite.connectionArgs]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const printed = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as AgentResult);
    expect(printed).toHaveLength(1000);
    expect(
      printed.every(
        (agent) =>
          (agent.output ?? '').length > 19_000 && agent.output === result.results[Number(agent.id.slice(1))].output,
      ),
    ).toBe(true);
  });

  it('starts 1,000 tasks with 2.5 KB prompts and a single 10 MB prompt by moving them to the store', async () => {
    const padding = 'word '.repeat(500);
    const many = await suite.stack.client.runParallel(
      Array.from({ length: 1000 }, (_, index) => ({ id: `p${index}`, prompt: `${index} ${padding}` })),
    );
    expect(many.metrics.succeeded).toBe(1000);
    // Each prompt reached the model whole: its token count includes every padding word.
    expect(many.results.every((agent) => (agent.usage?.promptTokens ?? 0) > 500)).toBe(true);

    const huge = `start ${'word '.repeat(2_000_000)}end`;
    const workflowId = uniqueName('huge');
    const one = await suite.stack.client.runParallel([{ id: 'huge', prompt: huge }], undefined, { workflowId });
    expect(one.results[0].status).toBe('ok');
    expect(one.results[0].usage?.promptTokens).toBeGreaterThan(2_000_000);
    expect(historyText(workflowId).length).toBeLessThan(200_000);
  });

  it('passes a 10 KB output to 500 dependants by reference, and a fan-in reads its inputs from the store', async () => {
    const nodes = [
      { id: 'root', prompt: 'the root' },
      ...Array.from({ length: 500 }, (_, index) => ({
        id: `child${index}`,
        prompt: `Use {{deps.root}} for part ${index}`,
        dependsOn: ['root'],
      })),
    ];
    const dag = await (await suite.stack.client.startDag(nodes, { maxParallel: 200 })).result();
    expect(dag.metrics.succeeded).toBe(501);
    const rootTokens = dag.results[0].usage?.completionTokens ?? 0;
    expect(rootTokens).toBe(ANSWER_WORDS);
    // Each child's prompt held the root's whole answer.
    expect(dag.results.slice(1).every((child) => (child.usage?.promptTokens ?? 0) >= rootTokens)).toBe(true);

    const fanIn = await (
      await suite.stack.client.startFanOutFanIn(
        Array.from({ length: 50 }, (_, index) => ({ id: `a${index}`, prompt: `analysis ${index}` })),
        { prompt: 'Combine these.' },
      )
    ).result();
    expect(fanIn.synthesis.status).toBe('ok');
    expect(fanIn.synthesis.usage?.promptTokens ?? 0).toBeGreaterThanOrEqual(50 * ANSWER_WORDS);
    expect(fanIn.synthesis.output?.length).toBeGreaterThan(19_000);
  });

  it('keeps each run’s payloads under runs/<workflow id>/ in the store', () => {
    const runs = readdirSync(path.join(store, 'runs'));
    expect(runs.length).toBeGreaterThanOrEqual(4);
  });
});

describe('input limits named before anything starts', () => {
  it('refuses an input that is still too large after moving prompts out, naming its size and the limit', async () => {
    const tasks = Array.from({ length: 1000 }, (_, index) =>
      JSON.stringify({ id: `m${index}`, prompt: 'x', model: `model-${'m'.repeat(2000)}` }),
    );
    const file = path.join(directory, 'wide.jsonl');
    writeFileSync(file, tasks.join('\n'));
    const { code, stderr } = await runCli(['run', file, ...suite.connectionArgs]);
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(
      /the tasks: is 2\.\d MB after moving large prompts to the payload store; the limit is 1\.5 MB/,
    );
  });

  it('refuses a task file larger than a run loads, naming both sizes', async () => {
    const file = path.join(directory, 'enormous.jsonl');
    writeFileSync(file, '');
    truncateSync(file, 300 * 1024 * 1024);
    const { code, stderr } = await runCli(['run', file, ...suite.connectionArgs]);
    expect(code).toBe(2);
    expect(stderr).toMatch(/tasks file is 314\.6 MB; the limit is 256\.0 MB/);
  });
});
