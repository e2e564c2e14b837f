import { CancellationScope, CancelledFailure, setHandler } from '@temporalio/workflow';
import type { SynthesisSection } from '../contract/agent-call';
import type { AgentResult, AgentTask } from '../contract/agent-task';
import type { FanOutFanInInput, FanOutFanInResult } from '../contract/dag';
import { computeMetrics } from '../contract/metrics';
import { resolveRunOptions } from '../contract/run-option-defaults';
import { validateFanOutFanInInput } from '../contract/validation';
import { TaskRun } from './task-run';
import { runInLanes } from './fan-out';
import { validateOrFail } from './input';
import { eventsQuery, progressQuery } from './messages';

const DEFAULT_SYNTHESIS =
  'Synthesise the analyses below into one answer. Note where they agree and where they conflict, and give actionable recommendations.';

/** One agent's part of the synthesis: its output by reference, or a note saying why there is none. */
function section(result: AgentResult): SynthesisSection {
  if (result.status === 'ok')
    return {
      name: result.name,
      status: 'ok',
      ...(result.outputRef ? { outputRef: result.outputRef } : { output: result.output ?? '' }),
    };
  return { name: result.name, status: result.status, note: result.error?.message ?? 'no output' };
}

/** A fan-out, then one synthesis agent over all of its outputs. */
export async function fanOutFanIn(input: FanOutFanInInput): Promise<FanOutFanInResult> {
  const { tasks, synthesis, options } = validateOrFail(validateFanOutFanInInput, input);
  const resolved = resolveRunOptions(options);
  const startedAt = Date.now();
  const synthesisTask: AgentTask = {
    id: synthesis?.id ?? 'synthesis',
    name: synthesis?.name ?? 'Synthesis',
    system: synthesis?.system,
    prompt: synthesis?.prompt ?? DEFAULT_SYNTHESIS,
    model: synthesis?.model,
    temperature: synthesis?.temperature,
    maxTokens: synthesis?.maxTokens,
  };
  const run = new TaskRun([...tasks, synthesisTask], resolved);
  setHandler(progressQuery, () => run.progress());
  setHandler(eventsQuery, (cursor) => run.eventsAfter(cursor ?? 0));
  run.describe(`fan-out of ${tasks.length} agents, then a synthesis`);

  // Stored, so the synthesis reads them by reference from the store rather than through history.
  await runInLanes(run, tasks.length, resolved.maxParallel, { storeOutput: true });
  const fannedOut = run.results.slice(0, tasks.length).filter((result): result is AgentResult => result !== undefined);
  if (!run.stopped) {
    await run.runTask(tasks.length, { synthesis: fannedOut.map(section) });
  }
  const all = run.finish();
  if (CancellationScope.current().consideredCancelled)
    throw new CancelledFailure('fan-out/fan-in cancelled; every agent it started has stopped');
  return {
    results: all.slice(0, tasks.length),
    synthesis: all[tasks.length],
    metrics: computeMetrics(all, Date.now() - startedAt),
    stoppedBy: run.stoppedBy,
  };
}
