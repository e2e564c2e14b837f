import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { FanoutClient } from '../../src/client/fanout-client';
import type { SimulatedRequest } from '../../src/sim/simulator';
import type { useWorkerProcesses } from './suite-stack';
import { uniqueName } from './test-stack';
import { waitFor } from './wait-for';

/** What a worker process of the batch-agent tests needs: the test tools, which call the simulator at `simulatorUrl`. */
export function agentWorkerEnvironment(simulatorUrl: string): Record<string, string> {
  return {
    FANOUT_TOOLS: path.join(__dirname, 'agent-tools.js'),
    FANOUT_TEST_SIM_URL: simulatorUrl,
  };
}

/** Writes `tasks` as the task file `<name>.jsonl` in `directory`; returns its path. */
export function writeJsonl(directory: string, name: string, tasks: object[]): string {
  const file = path.join(directory, `${name}.jsonl`);
  writeFileSync(file, `${tasks.map((task) => JSON.stringify(task)).join('\n')}\n`);
  return file;
}

/** Waits until the simulator has had a request for `taskId` from a workflow of the batch `batchId`. */
export async function waitForSent(
  simulator: { log(): readonly SimulatedRequest[] },
  batchId: string,
  taskId: string,
): Promise<void> {
  await waitFor(
    `${taskId} sent`,
    () => simulator.log().some((call) => call.workflowId.startsWith(batchId) && call.taskId === taskId),
    { timeoutMs: 60_000 },
  );
}

/** A worker process with the test tools on a queue of its own, and a client of that queue. */
export async function agentBatchClient(
  suite: ReturnType<typeof useWorkerProcesses>,
  name: string,
): Promise<{ client: FanoutClient; taskQueue: string }> {
  const taskQueue = uniqueName(name);
  await suite.spawnWorker(taskQueue, agentWorkerEnvironment(suite.servers.simulator.baseUrl));
  return { client: await FanoutClient.connect({ client: suite.servers.server.client, taskQueue }), taskQueue };
}
