import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createActivities } from '../src/activities';
import type { BatchPage, LaneResult } from '../src/contract/batch-activities';
import { laneName } from '../src/contract/lane-name';
import { createLlmClient } from '../src/llm/llm-client';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { LaneJournal, sealedLines, spoolOf } from '../src/spool';
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

/**
 * A lane of three items of the file named `name`, its item 1 failing once with a 500 (retryable): the first attempt
 * answers items 0 and 2, seals, and returns item 1 to be run again as a lane of its own.
 */
async function laneOfThree(name: string) {
  const file = writeTasks(directory, 3, (index) => (index === 1 ? 'x [sim fault=500 times=1]' : 'x'), name);
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
    spool: spoolOf(path.join(directory, `${name}-sink.jsonl`), 'run-1'),
    lane: laneName(0, 0),
    entries: page.entries,
    parallel: 1,
    itemAttemptMs: 30_000,
    maximumAttempts: 5,
    batchId: name,
  };
  const run = (attempt: number): Promise<LaneResult> =>
    activityEnvironment({ attempt }).run(activities.runBatchLane, input);
  return { page, input, run };
}

describe('a lane whose completion was lost after it sealed', () => {
  it('hands back the items its first attempt had queued to run again, so they reach a later lane', async () => {
    // Item 1 fails once with a 500 (retryable): the first attempt answers items 0 and 2, seals, and returns item 1 to
    // be run again as a lane of its own. That result is lost (the worker died before completing the activity), so
    // Temporal runs the lane again: it finds the lane sealed.
    const { page, run } = await laneOfThree('lost');
    const first = await run(1);
    expect(first.retry.map((retry) => retry.entry.id)).toEqual(['lost-1']);

    const again = await run(2);
    expect(again.succeeded).toBe(2);
    expect(again.retry.map((retry) => retry.entry)).toEqual([page.entries[1]]);
    // Nothing answered is sent again: the sealed attempt calls no one.
    expect(simulator.log().filter((request) => request.workflowId === 'lost')).toHaveLength(3);
  });

  it('reports an answer another attempt journaled after the seal, and sends it to no later lane', async () => {
    // Two attempts of a lane ran at once (one Temporal had given up on had not heard so yet): the first sealed with
    // item 1 queued to run again, and the other answered item 1 and journaled it after the seal. The retry that finds
    // the lane sealed takes that answer: a later lane would pay for it again.
    const { input, run } = await laneOfThree('overlap');
    const first = await run(1);
    expect(first.retry.map((retry) => retry.entry.id)).toEqual(['overlap-1']);
    const answer = { id: 'overlap-1', status: 'ok', output: 'from the other attempt', attempts: 2, durationMs: 5 };
    const journal = await LaneJournal.open(new FileStorage(), input.spool, input.lane);
    await journal.record(1, JSON.stringify(answer));
    await journal.close();

    const again = await run(3);
    expect({ succeeded: again.succeeded, retry: again.retry }).toEqual({ succeeded: 3, retry: [] });
    const segment = await sealedLines(new FileStorage(), input.spool, input.lane);
    expect(segment?.map((line) => (JSON.parse(line) as { id: string }).id).sort()).toEqual([
      'overlap-0',
      'overlap-1',
      'overlap-2',
    ]);
    // Item 1 was sent once (its 500), items 0 and 2 once each: the retry sent nothing.
    expect(simulator.log().filter((request) => request.workflowId === 'overlap')).toHaveLength(3);
  });
});
