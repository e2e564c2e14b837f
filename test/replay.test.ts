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
 * Saved (untraced) histories the traced workflow code does not replay: a worker restarted with tracing turned on cannot
 * carry these runs on. Found when the traced replay was added, on the code before that change too, and not yet traced to
 * its cause: in batch-stripes-lent the batch's two slot signals of one workflow task (events 53-54) are not scheduled
 * where the history has them ("No command scheduled for event 53, SignalExternalWorkflowExecutionInitiated"). Each is
 * checked to still fail, so a fix shows here until its fixture is taken off the list.
 */
const TRACED_NONDETERMINISM = new Set(['batch-stripes-lent.v0-2-0']);

describe('saved histories replay on the traced workflow code (a worker with tracing on)', () => {
  it.each(fixtures.map((fixture) => fixture.name).filter((name) => !TRACED_NONDETERMINISM.has(name)))(
    '%s replays without nondeterminism',
    (name) => {
      const result = replayedTraced.get(name);
      expect(result).toBeDefined();
      const error = result?.error;
      if (error) throw new Error(`${name}.json does not replay traced: ${error.name}: ${error.message}`);
    },
  );

  it.each([...TRACED_NONDETERMINISM])(
    '%s still does not (a known fault: take it off the list once it does)',
    (name) => {
      expect(replayedTraced.get(name)?.error?.name).toBe('DeterminismViolationError');
    },
  );
});
