import path from 'node:path';
import { FanoutClient } from '../src/client/fanout-client';
import { batchDirectory, sinkCounts, writeTasks } from './support/batch-files';
import { spawnWorker, type WorkerProcess } from './support/processes';
import { faultCost, requestsOfRun } from './support/request-ledger';
import { useTestServers } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

const workers: WorkerProcess[] = [];
const suite = useTestServers({
  beforeStop: async () => {
    for (const worker of workers) await worker.stop();
  },
});

/** What the issue promises for a dead worker's items in every case (issue 17). */
const RETRIED_WITHIN_MS = 60_000;

it("retries a SIGKILLed worker's lane within a minute when the lost-worker watchdog cannot judge, sending no answered item again", async () => {
  const { server, simulator } = suite.servers;
  const taskQueue = uniqueName('lane-heartbeat');
  // Peers judge a worker lost only after an hour: the lanes' own heartbeat timeout is all that notices the kill.
  const env = { OPENAI_BASE_URL: simulator.baseUrl, OPENAI_API_KEY: 'test-key', FANOUT_LOST_WORKER_MS: '3600000' };
  workers.push(await spawnWorker({ address: server.address, taskQueue, env }));
  const directory = batchDirectory();
  // Two lanes of three items (the lane shape's share of 12 at concurrency 2), 1.5 s a call: the kill leaves each lane an
  // answered item, a call open and an item not started.
  const source = writeTasks(directory, 12, () => 'long [sim latency=1500]', 'heartbeat');
  const sink = path.join(directory, 'heartbeat.jsonl');
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const handle = await client.startBatch({ source, sink, options: { concurrency: 2 } });

  const requests = () => requestsOfRun(simulator.log(), handle.batchId);
  // Killed mid-lane: answers journaled a while ago (the ledger counts one from the last second as in flight), calls open.
  await waitFor(
    'two answers over a second old and a call open',
    () => {
      const log = requests();
      const settled = log.filter(
        (request) => request.outcome === 200 && (request.respondedAt ?? Infinity) < Date.now() - 1000,
      );
      return settled.length >= 2 && log.some((request) => request.outcome === undefined);
    },
    { timeoutMs: 30_000, intervalMs: 20 },
  );
  await workers[0].kill();
  const killedAt = Date.now();
  // The calls the kill cut off: the retried lane sends each again, on the second worker.
  const cutOff = requests().filter((request) => request.outcome !== 200);
  expect(cutOff.length).toBeGreaterThan(0);
  workers.push(await spawnWorker({ address: server.address, taskQueue, env }));
  // Without the lanes' heartbeat timeout this would wait for their start-to-close timeout: hours.
  await waitFor(
    'the cut-off calls to be sent again',
    () =>
      cutOff.every(({ taskId }) => requests().some((later) => later.taskId === taskId && later.arrivedAt > killedAt)),
    {
      timeoutMs: RETRIED_WITHIN_MS + 30_000,
    },
  );

  const summary = await handle.result();
  expect(summary).toMatchObject({ total: 12, succeeded: 12, failed: 0 });
  expect(sinkCounts(sink)).toEqual({ lines: 12, ids: 12, ok: 12 });
  const log = requests();
  const delays = cutOff.map((request) => {
    const again = log.find((later) => later.taskId === request.taskId && later.arrivedAt > killedAt);
    return { taskId: request.taskId, sentAgainAfterMs: again === undefined ? undefined : again.arrivedAt - killedAt };
  });
  expect(
    delays.filter(({ sentAgainAfterMs }) => sentAgainAfterMs === undefined || sentAgainAfterMs >= RETRIED_WITHIN_MS),
  ).toEqual([]);
  const cost = faultCost(log, killedAt);
  expect(cost.answeredThenResent).toEqual([]);
  expect(cost.duplicated).toBeLessThanOrEqual(cost.openAt);
  expect(cost.openNow).toBe(0);
}, 150_000);
