import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createActivities } from '../src/activities';
import type { BatchPage, LaneResult } from '../src/contract/batch-activities';
import { laneName } from '../src/contract/lane-name';
import { createLlmClient } from '../src/llm/llm-client';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { spoolOf } from '../src/spool';
import { FileStorage } from '../src/store';
import { activityEnvironment } from './support/activity-environment';
import { writeTasks } from './support/batch-files';

let simulator: Simulator;
const directory = mkdtempSync(path.join(tmpdir(), 'fanout-lane-lost-'));

beforeAll(async () => {
  simulator = await startSimulator({ latency: { minMs: 5, maxMs: 5 } });
});

afterAll(async () => {
  await simulator.close();
  rmSync(directory, { recursive: true, force: true });
});

describe('a lane whose completion was lost after it sealed', () => {
  it('hands back the items its first attempt had queued to run again, so they reach a later lane', async () => {
    // Item 1 fails once with a 500 (retryable): the first attempt answers items 0 and 2, seals, and returns item 1 to
    // be run again as a lane of its own. That result is lost (the worker died before completing the activity), so
    // Temporal runs the lane again: it finds the lane sealed.
    const file = writeTasks(directory, 3, (index) => (index === 1 ? 'x [sim fault=500 times=1]' : 'x'), 'lost');
    const activities = createActivities({
      llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'k' }),
      storage: new FileStorage(),
    });
    const fileBytes = statSync(file).size;
    const page: BatchPage = await activityEnvironment().run(activities.readBatchPage, {
      file,
      fileBytes,
      offset: 0,
      limit: 10,
    });
    const input = {
      file,
      fileBytes,
      spool: spoolOf(path.join(directory, 'sink.jsonl'), 'run-1'),
      lane: laneName(0, 0),
      entries: page.entries,
      parallel: 1,
      itemAttemptMs: 30_000,
      maximumAttempts: 5,
      batchId: 'lost-completion',
    };
    const first: LaneResult = await activityEnvironment({ attempt: 1 }).run(activities.runBatchLane, input);
    expect(first.retry.map((retry) => retry.entry.id)).toEqual(['lost-1']);

    const again: LaneResult = await activityEnvironment({ attempt: 2 }).run(activities.runBatchLane, input);
    expect(again.succeeded).toBe(2);
    expect(again.retry.map((retry) => retry.entry)).toEqual([page.entries[1]]);
    // Nothing answered is sent again: the sealed attempt calls no one.
    expect(simulator.log().filter((request) => request.workflowId === 'lost-completion')).toHaveLength(3);
  });
});
