import { CancellationScope, CancelledFailure, condition, setHandler } from '@temporalio/workflow';
import type { AgentResult, AgentTask } from '../contract/agent-task';
import type { DagInput, DagResult } from '../contract/dag';
import { FailureType } from '../contract/failure-types';
import { criticalPath, parallelGroups } from '../contract/graph';
import { computeMetrics } from '../contract/metrics';
import { resolveRunOptions } from '../contract/run-option-defaults';
import { validateDagInput } from '../contract/validation';
import { TaskRun } from './task-run';
import { validateOrFail } from './input';
import { eventsQuery, progressQuery } from './messages';
import { skipped } from './task-outcome';

/**
 * Runs a graph of agents: each node starts the moment all of its dependencies have succeeded (not level by level),
 * at most `maxParallel` at once. Under 'continue' a failure skips only its descendants; under 'fail-fast' it cancels
 * everything in flight.
 */
export async function dag(input: DagInput): Promise<DagResult> {
  const { nodes, options } = validateOrFail(validateDagInput, input);
  const resolved = resolveRunOptions(options);
  const startedAt = Date.now();
  const tasks: AgentTask[] = nodes.map(({ dependsOn: _dependsOn, ...task }) => task);
  const run = new TaskRun(tasks, resolved);
  setHandler(progressQuery, () => run.progress());
  setHandler(eventsQuery, (cursor) => run.eventsAfter(cursor ?? 0));
  run.describe(`DAG of ${nodes.length} agents`);

  const dependants = new Map<string, number[]>();
  nodes.forEach((node, index) =>
    (node.dependsOn ?? []).forEach((id) => dependants.set(id, [...(dependants.get(id) ?? []), index])),
  );
  const waitingOn = nodes.map((node) => new Set(node.dependsOn ?? []));
  const hasDependants = nodes.map((node) => (dependants.get(node.id) ?? []).length > 0);
  const finished = new Map<string, AgentResult>();
  const ready: number[] = nodes.flatMap((node, index) => ((node.dependsOn ?? []).length === 0 ? [index] : []));
  let running = 0;
  let settled = 0;

  const skipDescendants = (failedId: string, cause: string): void => {
    for (const index of dependants.get(failedId) ?? []) {
      if (run.results[index] !== undefined) continue;
      const node = nodes[index];
      const result = skipped(node, FailureType.DependencyFailed, `skipped: its dependency "${cause}" did not succeed`);
      run.record(index, result);
      finished.set(node.id, result);
      settled += 1;
      skipDescendants(node.id, cause);
    }
  };

  const start = (index: number): void => {
    running += 1;
    const node = nodes[index];
    // Dependencies go by reference: the activity reads their outputs from the store, history never holds them.
    const dependencies = (node.dependsOn ?? []).map((id) => {
      const result = finished.get(id) as AgentResult;
      return { id, name: result.name, outputRef: result.outputRef as NonNullable<AgentResult['outputRef']> };
    });
    void run.runTask(index, { dependencies, storeOutput: hasDependants[index] }).then((result) => {
      running -= 1;
      settled += 1;
      finished.set(node.id, result);
      if (result.status !== 'ok') {
        // After a stop (fail-fast, timeout, cancel) the rest is reported not started, not skipped.
        if (!run.stopped) skipDescendants(node.id, node.id);
        return;
      }
      for (const dependant of dependants.get(node.id) ?? []) {
        waitingOn[dependant].delete(node.id);
        if (waitingOn[dependant].size === 0 && run.results[dependant] === undefined) ready.push(dependant);
      }
    });
  };

  while (settled < nodes.length && !run.stopped) {
    while (ready.length > 0 && running < resolved.maxParallel && !run.stopped) start(ready.shift() as number);
    await condition(
      () => settled === nodes.length || run.stopped || (ready.length > 0 && running < resolved.maxParallel),
    );
  }
  // After a stop, wait for the cancelled agents to report back before reporting anything.
  await condition(() => running === 0);

  const results = run.finish();
  if (CancellationScope.current().consideredCancelled)
    throw new CancelledFailure('DAG cancelled; every agent it started has stopped');
  const durations = new Map(
    results.filter((result) => result.status === 'ok').map((result) => [result.id, result.durationMs]),
  );
  return {
    results,
    groups: parallelGroups(nodes),
    metrics: { ...computeMetrics(results, Date.now() - startedAt), criticalPath: criticalPath(nodes, durations) },
    stoppedBy: run.stoppedBy,
  };
}
