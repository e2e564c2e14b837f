import { CancellationScope, CancelledFailure, setHandler } from '@temporalio/workflow';
import type { FanOutInput, FanOutResult } from '../contract/fan-out';
import { computeMetrics } from '../contract/metrics';
import { resolveRunOptions } from '../contract/run-option-defaults';
import { validateFanOutInput } from '../contract/validation';
import { TaskRun } from './task-run';
import { validateOrFail } from './input';
import { inLanes } from '../contract/in-lanes';
import { eventsQuery, progressQuery } from './messages';

/** Runs tasks 0..count-1 of `run` in input order, at most `lanes` at once, until done or stopped. */
export async function runInLanes(
  run: TaskRun,
  count: number,
  lanes: number,
  context: { storeOutput?: boolean } = {},
): Promise<void> {
  // Inside the run's scope once for all lanes, rather than once per task (runTask sees it is already there). With a lane
  // per task, the tasks are started directly and counted down as they settle: the same activities in the same order,
  // one promise per task (each costs a stack capture in the SDK's sandbox, which is most of the first workflow task of a
  // large fan-out; lanes or Promise.all would add one or two more per task).
  if (lanes >= count) {
    await run.scope.run(
      () =>
        new Promise<void>((resolve) => {
          let left = count;
          if (left === 0) resolve();
          const settled = () => {
            left -= 1;
            if (left === 0) resolve();
          };
          for (let index = 0; index < count; index += 1) void run.runTask(index, context, settled);
        }),
    );
  } else {
    let next = 0;
    const take = (): number | undefined => (next < count && !run.stopped ? next++ : undefined);
    await run.scope.run(() => inLanes(lanes, take, (index) => run.runTask(index, context)));
  }
}

/**
 * Runs every task as an agent activity, at most `maxParallel` at once, and returns every result in input
 * order. Waiting is concurrent, so the run takes as long as its slowest lane, never the sum of the agents.
 */
export async function fanOut(input: FanOutInput): Promise<FanOutResult> {
  const { tasks, options } = validateOrFail(validateFanOutInput, input);
  const resolved = resolveRunOptions(options);
  const startedAt = Date.now();
  const run = new TaskRun(tasks, resolved);
  setHandler(progressQuery, () => run.progress());
  setHandler(eventsQuery, (cursor) => run.eventsAfter(cursor ?? 0));
  run.describe(`fan-out of ${tasks.length} agents`);

  await runInLanes(run, tasks.length, resolved.maxParallel);

  const results = run.finish();
  // Every activity has stopped by now (cancellation waits for them); only then is the cancellation reported.
  if (CancellationScope.current().consideredCancelled) {
    throw new CancelledFailure('fan-out cancelled; the agents it started were cancelled and have stopped');
  }
  return { results, metrics: computeMetrics(results, Date.now() - startedAt), stoppedBy: run.stoppedBy };
}
