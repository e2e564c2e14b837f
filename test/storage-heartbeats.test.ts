import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createActivities } from '../src/activities';
import { laneName } from '../src/contract/lane-name';
import { spoolOf } from '../src/spool';
import { FileStorage, type ObjectStorage } from '../src/store';
import { activityEnvironment } from './support/activity-environment';

const directory = mkdtempSync(path.join(tmpdir(), 'fanout-storage-heartbeats-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** A store whose every read and write takes `delayMs` longer: S3 on a bad day. */
function slowStorage(delayMs: number): ObjectStorage {
  const storage = new FileStorage();
  const slow: ObjectStorage = Object.create(storage) as ObjectStorage;
  const later = () => new Promise((resolve) => setTimeout(resolve, delayMs));
  slow.read = async (uri) => (await later(), storage.read(uri));
  slow.write = async (uri, data, options) => (await later(), storage.write(uri, data, options));
  return slow;
}

/** Runs one activity in its own environment and counts the heartbeats it sent. */
async function heartbeatsOf<T>(
  run: (environment: ReturnType<typeof activityEnvironment>) => Promise<T>,
): Promise<number> {
  const environment = activityEnvironment();
  let beats = 0;
  environment.on('heartbeat', () => (beats += 1));
  await run(environment);
  return beats;
}

describe('storage activities on a slow store', () => {
  it('heartbeat while a seal, a retry read or an agent item seal outlasts the heartbeat cadence', async () => {
    // Their heartbeat timeout is 10 s: without heartbeats, a store slower than that fails them again and again.
    const storage = slowStorage(3500);
    const activities = createActivities({ storage });
    const spool = spoolOf(path.join(directory, 'sink.jsonl'), 'run-1');
    const retries = path.join(directory, 'retries.jsonl');
    writeFileSync(retries, `${JSON.stringify({ id: 'a', offset: 0, length: 10 })}\n`);
    const failure = { type: 'Timeout', message: 'the lane ran out of attempts' };
    const beats = await Promise.all([
      heartbeatsOf((environment) =>
        environment.run(activities.sealBatchLane, {
          spool,
          lane: laneName(0, 0),
          entries: [{ id: 'a', offset: 0, length: 10 }],
          failure,
          attempts: 3,
        }),
      ),
      heartbeatsOf((environment) => environment.run(activities.readRetryEntries, { uri: retries })),
      heartbeatsOf((environment) =>
        environment.run(activities.sealAgentItem, {
          spool,
          lane: laneName(0, 1),
          line: { id: 'b', status: 'ok' as const, output: 'answer', attempts: 1, durationMs: 1 },
        }),
      ),
    ]);
    for (const count of beats) expect(count).toBeGreaterThanOrEqual(1);
  });
});
