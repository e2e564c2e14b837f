import { CancellationScope, CancelledFailure, setCurrentDetails, setHandler } from '@temporalio/workflow';
import type { AgentResult, AgentTask } from '../contract/agent-task';
import type { FanOutFanInInput, FanOutFanInResult } from '../contract/dag';
import { computeMetrics } from '../contract/metrics';
import { resolveRunOptions } from '../contract/run-options';
import { validateFanOutFanInInput } from '../contract/validation';
import { AgentRun } from './agent-run';
import { runInLanes } from './fan-out';
import { validateOrFail } from './input';
import { eventsQuery, progressQuery } from './messages';

const DEFAULT_SYNTHESIS =
  'Synthesise the analyses below into one answer. Note where they agree and where they conflict, and give actionable recommendations.';

/** The synthesis prompt: the instructions, then every agent's output; failed agents appear as notes, not silently dropped. */
export function synthesisPrompt(instructions: string, results: readonly AgentResult[]): string {
  const sections = results.map((result) =>
    result.status === 'ok'
      ? `## ${result.name}\n${result.output ?? ''}`
      : `## ${result.name}\n(note: this agent ${result.status}: ${result.error?.message ?? 'no output'})`,
  );
  return `${instructions}\n\n${sections.join('\n\n')}`;
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
  const run = new AgentRun([...tasks, synthesisTask], resolved);
  setHandler(progressQuery, () => run.progress());
  setHandler(eventsQuery, (cursor) => run.eventsAfter(cursor ?? 0));
  setCurrentDetails(`fan-out of ${tasks.length} agents, then a synthesis`);

  await runInLanes(run, tasks.length, resolved.maxParallel);
  const fannedOut = run.results.slice(0, tasks.length).filter((result): result is AgentResult => result !== undefined);
  if (!run.stopped) {
    await run.runTask(tasks.length, { ...synthesisTask, prompt: synthesisPrompt(synthesisTask.prompt, fannedOut) });
  }
  const all = run.finish();
  if (CancellationScope.current().consideredCancelled) throw new CancelledFailure('fan-out/fan-in cancelled; every agent it started has stopped');
  return {
    results: all.slice(0, tasks.length),
    synthesis: all[tasks.length],
    metrics: computeMetrics(all, Date.now() - startedAt),
    stoppedBy: run.stoppedBy,
  };
}
