import { readdirSync } from 'node:fs';
import path from 'node:path';
import { Worker, type ReplayResult } from '@temporalio/worker';
import * as workflows from '../src/workflows';
import { tracedBundleOf } from '../src/telemetry/worker-tracing';
import { readHistory } from './support/history-json';

/**
 * Every saved history (test/fixtures/histories, `npm run fixtures:capture`) is replayed against the workflow bundle this
 * build produced. A change to workflow code that would break a run in flight (a command added, removed or reordered
 * without a `patched()` gate) fails here, naming the fixture. See CONTRIBUTING.md, "Changing workflow code".
 */
const FIXTURES = path.join(__dirname, 'fixtures', 'histories');
const fixtures = readdirSync(FIXTURES)
  .filter((file) => file.endsWith('.json'))
  .sort()
  .map((file) => ({ name: file.slice(0, -'.json'.length), history: readHistory(path.join(FIXTURES, file)) }));

/**
 * The capture script runs each scenario under the workflow id that is its file name up to the first dot. An agent of a
 * batch (`<scenario>.agent-<item>`) had `<scenario>/agent:<item>`, which its sub-agents' ids are derived from.
 */
const workflowIdOf = (name: string): string => {
  const [scenario, ...parts] = name.split('.');
  const agent = parts.find((part) => part.startsWith('agent-'));
  return agent === undefined ? scenario : `${scenario}/agent:${agent.slice('agent-'.length)}`;
};

const workflowTypeOf = (fixture: (typeof fixtures)[number]): string =>
  fixture.history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name ?? '(no start event)';

/** The workflow bundle this build produced (`traced`: its twin with the tracing interceptors, which a traced worker runs). */
function bundle(traced: boolean): string {
  const codePath = process.env.FANOUT_WORKFLOW_BUNDLE;
  if (!codePath)
    throw new Error('FANOUT_WORKFLOW_BUNDLE is not set (test/support/global-setup.ts sets it after `npm run build`)');
  if (!traced) return codePath;
  const twin = tracedBundleOf(codePath);
  if (!twin) throw new Error(`no traced twin of ${codePath}`);
  return twin;
}

/** Replays every fixture on one replay worker; histories are replayed one at a time, in the order given. */
async function replayAll(codePath: string): Promise<Map<string, ReplayResult>> {
  const results = new Map<string, ReplayResult>();
  const replays = Worker.runReplayHistories(
    { workflowBundle: { codePath } },
    fixtures.map((fixture) => ({ workflowId: workflowIdOf(fixture.name), history: fixture.history })),
  );
  let index = 0;
  for await (const result of replays) {
    results.set(fixtures[index].name, result);
    index += 1;
  }
  return results;
}

let replayed: Map<string, ReplayResult>;
let replayedTraced: Map<string, ReplayResult>;

beforeAll(async () => {
  replayed = await replayAll(bundle(false));
  replayedTraced = await replayAll(bundle(true));
});

describe('saved histories replay on the current workflow code', () => {
  it('has a fixture of every workflow the worker registers, including a batch whose windows hand over', () => {
    const registered = Object.entries(workflows)
      .filter(([, value]) => typeof value === 'function')
      .map(([name]) => name)
      .sort();
    const covered = new Set(fixtures.map(workflowTypeOf));
    expect(registered.filter((name) => !covered.has(name))).toEqual([]);
    const handedOver = (fixture: (typeof fixtures)[number]) =>
      fixture.history.events?.some(
        (event) => event.workflowExecutionSignaledEventAttributes?.signalName === 'slotsFreed',
      );
    expect(fixtures.filter(handedOver).length).toBeGreaterThan(0);
  });

  it.each(fixtures.map((fixture) => fixture.name))('%s replays without nondeterminism', (name) => {
    const result = replayed.get(name);
    expect(result).toBeDefined();
    const error = result?.error;
    if (error) throw new Error(`${name}.json does not replay: ${error.name}: ${error.message}`);
  });
});

/**
 * A worker restarted with tracing turned on carries on the runs an untraced worker started: the traced interceptors
 * settle every promise workflow code awaits when the untraced code does (src/telemetry/workflow-interceptors.ts). The
 * other way round, a traced worker's batch replayed untraced, is test/tracing.test.ts's.
 */
describe('saved histories replay on the traced workflow code (a worker with tracing on)', () => {
  it.each(fixtures.map((fixture) => fixture.name))('%s replays without nondeterminism', (name) => {
    const result = replayedTraced.get(name);
    expect(result).toBeDefined();
    const error = result?.error;
    if (error) throw new Error(`${name}.json does not replay traced: ${error.name}: ${error.message}`);
  });
});
