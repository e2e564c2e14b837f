import path from 'node:path';
import type { BatchProgress, BatchSummary } from '../src/contract/batch';
import { batchDirectory, sinkCounts, startTaskBatch, writeTasks } from './support/batch-files';
import { runCli } from './support/processes';
import { useProviderBatchStack } from './support/provider-batch-stack';
import { waitFor } from './support/wait-for';

// 10 simulated seconds per real one, 150 per batch: the provider batch runs for 15 s, items answering all along.
const suite = useProviderBatchStack({ providerBatches: { speed: 10, processingSeconds: { min: 150, max: 150 } } }, [
  'openai',
]);

const ITEMS = 40;

describe('batch status of a provider-batch route', () => {
  it('shows each provider batch with its id, status and counts while the batch runs', async () => {
    const { handle, sink } = await startTaskBatch(
      suite.stack.client,
      'status',
      ITEMS,
      (index) => `status item ${index}`,
      { route: 'provider-batch', providerPollSeconds: 0.2 },
    );
    const cli = (...flags: string[]) => runCli(['batch', 'status', handle.batchId, ...flags, ...suite.connectionArgs]);

    // The provider batch is seen part-way, in both forms of the same look: created, running, some items answered and
    // some not yet, while the batch workflow runs.
    let running: BatchProgress | undefined;
    let text = '';
    await waitFor(
      'batch status to show the provider batch part-way',
      async () => {
        const [json, plain] = await Promise.all([cli('--json'), cli()]);
        if (json.code !== 0 || plain.code !== 0 || json.stdout.trim() === '') return false;
        const progress = JSON.parse(json.stdout) as BatchProgress;
        const batch = progress.providerBatches?.[0];
        if (progress.state !== 'running' || !batch || batch.status !== 'in_progress') return false;
        if (batch.counts.succeeded === 0 || batch.counts.succeeded === ITEMS) return false;
        if (!plain.stdout.includes(`batch ${handle.batchId}: running`) || !/: in_progress, \d+ ok/.test(plain.stdout))
          return false;
        running = progress;
        text = plain.stdout;
        return true;
      },
      { timeoutMs: 60_000 },
    );
    const created = suite.servers.simulator.batchStats().batches;
    expect(created).toHaveLength(1);
    expect(running?.route).toBe('provider-batch');
    expect(running?.providerBatches).toEqual([
      {
        provider: 'openai',
        id: created[0].id,
        status: 'in_progress',
        counts: expect.objectContaining({ total: ITEMS }),
      },
    ]);
    // Answered items of a provider batch are not in the sink until the batch ends: nothing counts as done yet.
    expect(running?.done).toBe(0);
    // The text form names the batch, its status and counts.
    expect(text).toMatch(
      new RegExp(`openai batch ${created[0].id}: in_progress, \\d+ ok, 0 failed, \\d+ processing of ${ITEMS}`),
    );
    expect(text).toContain('route provider-batch');

    const summary = await handle.result();
    expect(summary).toMatchObject({ route: 'provider-batch', succeeded: ITEMS, failed: 0 });
    expect(summary.providerBatches).toEqual([
      {
        provider: 'openai',
        id: created[0].id,
        status: 'completed',
        counts: { total: ITEMS, succeeded: ITEMS, failed: 0, processing: 0 },
      },
    ]);
    expect(sinkCounts(sink)).toEqual({ lines: ITEMS, ids: ITEMS, ok: ITEMS });
    expect(suite.servers.simulator.batchStats()).toMatchObject({ batchesCreated: 1, itemsAnswered: ITEMS });
    // Every answer came through the provider batch: no chat completion was sent.
    expect(suite.servers.simulator.log()).toHaveLength(0);
  });

  it('--watch refreshes the provider batch as it goes, though the history of the batch itself does not move meanwhile', async () => {
    suite.servers.simulator.reset();
    const directory = batchDirectory();
    const source = writeTasks(directory, ITEMS, (index) => `watched item ${index}`, 'watched');
    const handle = await suite.stack.client.startBatch({
      source,
      sink: path.join(directory, 'watched.jsonl'),
      options: { route: 'provider-batch', providerPollSeconds: 0.2 },
    });
    const { code, stdout } = await runCli([
      'batch',
      'status',
      handle.batchId,
      '--watch',
      '--json',
      ...suite.connectionArgs,
    ]);
    expect(code).toBe(0);
    const lines = stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Partial<BatchProgress> & Partial<BatchSummary>);
    // Progress lines while the provider batch ran, at least two of them with different counts; the summary last.
    const answeredSoFar = lines
      .filter((line) => line.providerBatches?.[0]?.status === 'in_progress')
      .map((line) => line.providerBatches?.[0]?.counts.succeeded);
    expect(new Set(answeredSoFar).size).toBeGreaterThanOrEqual(2);
    expect(lines.at(-1)).toMatchObject({ route: 'provider-batch', succeeded: ITEMS, failed: 0 });
    expect(suite.servers.simulator.batchStats()).toMatchObject({ batchesCreated: 1, itemsAnswered: ITEMS });
  });
});
