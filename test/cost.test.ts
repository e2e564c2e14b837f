import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AgentResult, AgentTask } from '../src/contract/agent-task';
import type { BatchSummary } from '../src/contract/batch';
import { BUILT_IN_PRICES, priceFor, priceOf, pricesFromEnvironment } from '../src/pricing';
import { progressQuery } from '../src/workflows/messages';
import { readSink } from './support/batch-files';
import { runCli } from './support/processes';
import { useTestStack } from './support/suite-stack';
import { uniqueName } from './support/test-stack';

/**
 * Prices of the simulator's model, set the way an operator would (FANOUT_PRICES): a thousandth of a dollar per prompt
 * token and four per completion token, so each call's exact cost is (prompt + 4 × completion) / 1000 dollars.
 */
const PRICES = { 'gpt-4o-mini': { inputPerMillion: 1000, outputPerMillion: 4000 } };
const priceUnits = (result: AgentResult): number =>
  (result.usage?.promptTokens ?? NaN) + 4 * (result.usage?.completionTokens ?? NaN);
const expectedCost = (...results: AgentResult[]): number =>
  results.reduce((sum, result) => sum + priceUnits(result), 0) / 1000;

const directory = mkdtempSync(path.join(tmpdir(), 'fanout-cost-'));
const suite = useTestStack({
  worker: {
    heartbeatThrottleMs: 500,
    activities: { prices: pricesFromEnvironment({ FANOUT_PRICES: JSON.stringify(PRICES) }) },
  },
});

/** What the simulator saw of one run, by task id. */
/** A run that spends its budget on its first answer: 'first' answers soon, `slow` in a minute, `later` wait behind them. */
function budgetRunTasks(slow: string[], later: string[]): AgentTask[] {
  return [
    { id: 'first', prompt: 'answers soon [sim latency=1500]' },
    ...slow.map((id) => ({ id, prompt: 'answers in a minute [sim latency=60000]' })),
    ...later.map((id) => ({ id, prompt: 'never starts' })),
  ];
}

function requestsOf(workflowId: string) {
  return new Map(
    suite.servers.simulator
      .log()
      .filter((request) => request.workflowId === workflowId)
      .map((request) => [request.taskId, request]),
  );
}

describe('the price table', () => {
  it('prices a dated snapshot as its model and leaves an unknown model unpriced, never $0', () => {
    expect(priceFor('gpt-4o-2024-08-06', BUILT_IN_PRICES)).toEqual(BUILT_IN_PRICES['gpt-4o']);
    expect(
      priceOf('gpt-4o-2024-08-06', { promptTokens: 1000, completionTokens: 200, totalTokens: 1200 }, BUILT_IN_PRICES),
    ).toBe(0.0045);
    expect(
      priceOf('my-finetune', { promptTokens: 10, completionTokens: 10, totalTokens: 20 }, BUILT_IN_PRICES),
    ).toBeUndefined();
    expect(priceOf('gpt-4o', undefined, BUILT_IN_PRICES)).toBeUndefined();
    // Only a date is a snapshot suffix: a different model of the same family keeps its own price (or none).
    expect(priceFor('gpt-4o-mini', BUILT_IN_PRICES)).not.toEqual(BUILT_IN_PRICES['gpt-4o']);
    expect(priceFor('gpt-4o-audio-preview', BUILT_IN_PRICES)).toBeUndefined();
  });

  it('takes FANOUT_PRICES_FILE over the built-in prices and FANOUT_PRICES over both, model by model', () => {
    const file = path.join(directory, 'prices.json');
    writeFileSync(
      file,
      JSON.stringify({
        'gpt-4o': { inputPerMillion: 1, outputPerMillion: 2 },
        'house-model': { inputPerMillion: 3, outputPerMillion: 4 },
      }),
    );
    const table = pricesFromEnvironment({
      FANOUT_PRICES_FILE: file,
      FANOUT_PRICES: JSON.stringify({ 'house-model': { inputPerMillion: 5, outputPerMillion: 6 } }),
    });
    expect(table['gpt-4o']).toEqual({ inputPerMillion: 1, outputPerMillion: 2 });
    expect(table['house-model']).toEqual({ inputPerMillion: 5, outputPerMillion: 6 });
    expect(table['gpt-4.1']).toEqual(BUILT_IN_PRICES['gpt-4.1']);
  });

  it('refuses bad price JSON with a message naming the variable, the model and the field', () => {
    expect(() => pricesFromEnvironment({ FANOUT_PRICES: '{"gpt-4o": ' })).toThrow(
      /^FANOUT_PRICES: the value is not JSON/,
    );
    expect(() =>
      pricesFromEnvironment({ FANOUT_PRICES: '{"gpt-4o": { "inputPerMillion": "2.5", "outputPerMillion": 10 }}' }),
    ).toThrow(/^FANOUT_PRICES: the value is not a price table \("gpt-4o"\.inputPerMillion: .*number/);
    expect(() =>
      pricesFromEnvironment({ FANOUT_PRICES: '{"gpt-4o": { "input": 2.5, "outputPerMillion": 10 }}' }),
    ).toThrow(/"gpt-4o": unknown field "input"/);
    expect(() =>
      pricesFromEnvironment({ FANOUT_PRICES: '{"gpt-4o": { "inputPerMillion": -1, "outputPerMillion": 10 }}' }),
    ).toThrow(/"gpt-4o"\.inputPerMillion/);
    const file = path.join(directory, 'broken.json');
    writeFileSync(file, '[1, 2]');
    expect(() => pricesFromEnvironment({ FANOUT_PRICES_FILE: file })).toThrow(
      new RegExp(`^FANOUT_PRICES_FILE: ${file} is not a price table`),
    );
    expect(() => pricesFromEnvironment({ FANOUT_PRICES_FILE: path.join(directory, 'missing.json') })).toThrow(
      /^FANOUT_PRICES_FILE: cannot read .*missing\.json \(ENOENT\)/,
    );
  });

  it('keeps a worker with a bad FANOUT_PRICES from starting, and says which variable to fix', async () => {
    const worker = await runCli(
      ['worker', '--address', suite.servers.server.address, '--task-queue', uniqueName('tq')],
      { FANOUT_PRICES: '{"gpt-4o": 2.5}' },
    );
    expect(worker.code).not.toBe(0);
    expect(worker.stderr).toMatch(/^fanout: FANOUT_PRICES: the value is not a price table \("gpt-4o": /m);
    expect(worker.stderr).not.toContain('worker polling');
  });
});

describe('costs of a run', () => {
  it('gives each result and the run its exact cost from the price table, and reports an unknown model unpriced', async () => {
    const workflowId = uniqueName('priced');
    const handle = await suite.stack.client.startParallel(
      [
        { id: 'default-model', prompt: 'three word prompt' },
        { id: 'dated-model', prompt: 'a slightly longer prompt of seven words', model: 'gpt-4o-mini-2024-07-18' },
        { id: 'house-model', prompt: 'who prices me', model: 'house-model' },
      ],
      {},
      { workflowId },
    );
    const { results, metrics } = await handle.result();
    const [byDefault, dated, house] = results;
    expect(results.map((result) => result.status)).toEqual(['ok', 'ok', 'ok']);
    expect(byDefault.usage?.completionTokens).toBeGreaterThan(0);
    expect(byDefault.costUsd).toBe(expectedCost(byDefault));
    expect(dated.model).toBe('gpt-4o-mini-2024-07-18');
    expect(dated.costUsd).toBe(expectedCost(dated));
    expect(house.costUsd).toBeUndefined();
    expect(house.unpriced).toBe(true);
    expect(metrics.cost).toEqual({ usd: expectedCost(byDefault, dated), unpricedCalls: 1 });
    // The same spend in the progress query (what `fanout status` prints) and in the run's details in the Temporal UI.
    expect((await handle.workflow.query(progressQuery)).cost).toEqual(metrics.cost);
    const { currentDetails } = await handle.workflow.query<{ currentDetails: string }>('__temporal_workflow_metadata');
    expect(currentDetails).toBe(
      `fan-out of 3 agents\n\ncost so far: $${metrics.cost.usd} (+ 1 unpriced calls), ${metrics.tokens.total} tokens`,
    );
  });

  it('cancels the calls in flight once costBudgetUsd is reached and skips the rest, BudgetExhausted', async () => {
    const workflowId = uniqueName('cost-budget');
    const { results, metrics, stoppedBy } = await suite.stack.client.runParallel(
      budgetRunTasks(['slow-1', 'slow-2'], ['later-1', 'later-2']),
      // One answer costs more than this: any prompt token is $0.001.
      { maxParallel: 3, costBudgetUsd: 0.001 },
      { workflowId },
    );
    expect(stoppedBy).toBe('budget');
    expect(results.map((result) => `${result.id}:${result.status}:${result.error?.type ?? ''}`)).toEqual([
      'first:ok:',
      'slow-1:cancelled:BudgetExhausted',
      'slow-2:cancelled:BudgetExhausted',
      'later-1:skipped:BudgetExhausted',
      'later-2:skipped:BudgetExhausted',
    ]);
    expect(results[1].error?.message).toMatch(/cancelled while running: the run's cost budget \(\$0\.001\) is spent/);
    expect(metrics.cost.usd).toBe(results[0].costUsd);
    expect(metrics).toMatchObject({ succeeded: 1, cancelled: 2, skipped: 2 });
    // The cancelled calls really stopped: the simulator saw their connections closed before it answered.
    const requests = requestsOf(workflowId);
    expect([...requests.keys()].sort()).toEqual(['first', 'slow-1', 'slow-2']);
    expect(requests.get('slow-1')?.clientClosedAt).toBeDefined();
    expect(requests.get('slow-2')?.clientClosedAt).toBeDefined();
    expect(requests.get('first')?.clientClosedAt).toBeUndefined();
  });

  it('cancels the calls in flight once tokenBudget is reached, the same way', async () => {
    const workflowId = uniqueName('token-budget');
    const { results, stoppedBy } = await suite.stack.client.runParallel(
      budgetRunTasks(['slow'], ['later']),
      { maxParallel: 2, tokenBudget: 1 },
      { workflowId },
    );
    expect(stoppedBy).toBe('budget');
    expect(results.map((result) => `${result.status}:${result.error?.type ?? ''}`)).toEqual([
      'ok:',
      'cancelled:BudgetExhausted',
      'skipped:BudgetExhausted',
    ]);
    expect(results[2].error?.message).toMatch(/the run's token budget \(1\) is spent: \d+ tokens used/);
    expect(requestsOf(workflowId).get('slow')?.clientClosedAt).toBeDefined();
  });

  it('takes --budget-usd on `fanout run` and shows the cost in the report, `status` and `results`', async () => {
    const tasks = path.join(directory, 'budget.jsonl');
    writeFileSync(
      tasks,
      [
        { id: 'quick', prompt: 'x [sim latency=1000]' },
        { id: 'slow', prompt: 'x [sim latency=60000]' },
        { id: 'later', prompt: 'x' },
      ]
        .map((task) => JSON.stringify(task))
        .join('\n'),
    );
    const workflowId = uniqueName('cli-budget');
    const run = await runCli([
      'run',
      tasks,
      '--parallel',
      '2',
      '--budget-usd',
      '0.001',
      '--id',
      workflowId,
      ...suite.connectionArgs,
    ]);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/quick\s+ok\s+1\s+\S+\s+\$0\.\d{6}\s/);
    expect(run.stdout).toMatch(/slow\s+cancelled\s+1\s+\S+\s+BudgetExhausted: /);
    expect(run.stdout).toMatch(/later\s+skipped\s+0\s+\S+\s+BudgetExhausted: /);
    expect(run.stdout).toMatch(/^cost: \$0\.\d{6}$/m);
    expect(run.stdout).toContain('stopped early: budget');

    const status = await runCli(['status', workflowId, ...suite.connectionArgs]);
    expect(status.stdout).toMatch(/^cost so far: \$0\.\d{6}$/m);
    const results = await runCli(['results', workflowId, ...suite.connectionArgs]);
    expect(results.stdout).toMatch(/^cost: \$0\.\d{6}$/m);
    const bad = await runCli(['run', tasks, '--budget-usd', '0', ...suite.connectionArgs]);
    expect(bad.code).toBe(2);
  });

  it('stops a batch at --budget-usd: the items in flight are cancelled and nothing more starts', async () => {
    const source = path.join(directory, 'batch.jsonl');
    const prompts = ['x [sim latency=1500]', 'x [sim latency=60000]', 'x [sim latency=60000]', 'x', 'x', 'x'];
    writeFileSync(source, prompts.map((prompt, index) => JSON.stringify({ id: `item-${index}`, prompt })).join('\n'));
    const sink = path.join(directory, 'batch-results.jsonl');
    const batchId = uniqueName('batch-budget');
    const started = await runCli([
      'batch',
      'start',
      source,
      '--out',
      sink,
      '--id',
      batchId,
      '--concurrency',
      '3',
      '--budget-usd',
      '0.001',
      '--watch',
      '--json',
      ...suite.connectionArgs,
    ]);
    expect(started.code).toBe(1);
    const summary = JSON.parse(started.stdout.trim().split('\n').pop() ?? '') as BatchSummary;
    expect(summary).toMatchObject({ stoppedBy: 'budget', succeeded: 1, failed: 0, notRun: 5 });
    const lines = readSink(sink);
    expect(lines.map((line) => line.id)).toEqual(['item-0']);
    expect(lines[0].costUsd).toBe(expectedCost(lines[0] as AgentResult));
    expect(summary.cost).toEqual({ usd: lines[0].costUsd, unpricedCalls: 0 });
    const requests = requestsOf(batchId);
    expect([...requests.keys()].sort()).toEqual(['item-0', 'item-1', 'item-2']);
    expect(requests.get('item-1')?.clientClosedAt).toBeDefined();
    expect(requests.get('item-2')?.clientClosedAt).toBeDefined();
    const status = await runCli(['batch', 'status', batchId, ...suite.connectionArgs]);
    expect(status.stdout).toContain('(stopped early: budget)');
    expect(status.stdout).toMatch(/cost \$0\.\d{6},/);
  });
});
