import path from 'node:path';
import type { SimulatorConfigInput } from '../src/sim/config';
import { batchDirectory, readSink, sinkCounts, startTaskBatch, writeTasks } from './support/batch-files';
import { runBatchStart } from './support/processes';
import { requestsOfRun } from './support/request-ledger';
import { useProviderBatchStack } from './support/provider-batch-stack';

const directory = batchDirectory();

/** Simulated time at 1,000 x: a provider batch of 100-300 simulated seconds answers in 0.1-0.3 s; one with an expiring item ends at 1.5 s. */
const FAST: SimulatorConfigInput = {
  providerBatches: { speed: 1000, processingSeconds: { min: 100, max: 300 }, expiresAfterSeconds: 1500 },
};

const suite = useProviderBatchStack(FAST);

describe('a batch chooses its route', () => {
  it('provider-batch: answers at the batch price, sends what expired or failed retryably in a second provider batch, and only what that hands back sync', async () => {
    const fate = (index: number) =>
      index === 3 || index === 11 ? ' [sim batch=expired]' : index === 7 ? ' [sim batch=error-500]' : '';
    const { handle, sink } = await startTaskBatch(
      suite.stack.client,
      'routed',
      30,
      (index) => `route item ${index}${fate(index)}`,
      { route: 'provider-batch', providerPollSeconds: 0.05, concurrency: 5 },
    );
    const summary = await handle.result();
    expect(summary).toMatchObject({ route: 'provider-batch', total: 30, succeeded: 30, failed: 0 });
    expect(sinkCounts(sink)).toEqual({ lines: 30, ids: 30, ok: 30 });
    expect(summary.providerBatches?.map((batch) => batch.counts.total)).toEqual([30, 3]);
    expect(summary.savingsUsd).toBeGreaterThan(0);
    // The first provider batch answered 27 and the second, of the three it handed back, none (their markers hold);
    // those three went as chat completions, and nothing else did.
    expect(suite.servers.simulator.batchStats()).toMatchObject({
      batchesCreated: 2,
      itemsSubmitted: 33,
      itemsAnswered: 27,
    });
    expect(
      requestsOfRun(suite.servers.simulator.log(), handle.batchId)
        .map((request) => request.taskId)
        .sort(),
    ).toEqual(['routed-11', 'routed-3', 'routed-7']);
    expect(
      readSink(sink)
        .filter((line) => ['routed-3', 'routed-7', 'routed-11'].includes(line.id))
        .every((line) => line.status === 'ok'),
    ).toBe(true);
  });

  it('auto: a small batch with a short deadline goes sync', async () => {
    const source = writeTasks(directory, 8, () => 'x', 'auto');
    const handle = await suite.stack.client.startBatch({
      source,
      sink: path.join(directory, 'auto.jsonl'),
      options: { route: 'auto', deadlineMs: 60_000 },
    });
    expect(await handle.result()).toMatchObject({ route: 'sync', succeeded: 8 });
    expect(requestsOfRun(suite.servers.simulator.log(), handle.batchId)).toHaveLength(8);
  });

  it('refuses an unknown route or deadline before starting, naming the option', async () => {
    const source = writeTasks(directory, 2, () => 'x', 'bad-route');
    for (const [flag, value] of [
      ['--route', 'cheapest'],
      ['--deadline', 'tomorrow'],
    ]) {
      const cli = await runBatchStart(source, path.join(directory, 'bad-route.jsonl'), [
        flag,
        value,
        ...suite.connectionArgs,
      ]);
      expect({ flag, code: cli.code }).toEqual({ flag, code: 2 });
      expect(cli.stderr).toContain(value);
    }
  });
});
