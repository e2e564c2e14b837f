import { Command } from 'commander';
import { Presets, SingleBar } from 'cli-progress';
import type { RunHandle } from '../../client/fanout-client';
import { QueryGate } from '../../client/query-gate';
import { CliError, ExitCode } from '../errors';
import { clientCommand, onRun, type ConnectionFlags } from '../options';
import { printRunResult } from '../run-result';
import { formatAgentEvent, runningAgents } from '../agent-view';
import { pause } from '../pause';

interface WatchFlags extends ConnectionFlags {
  json?: boolean;
}

/** Progress bar and live events until the run closes, then its result. */
export async function watchRun(handle: RunHandle<unknown>, flags: WatchFlags): Promise<void> {
  const bar = flags.json
    ? undefined
    : new SingleBar(
        {
          format: '{bar} {value}/{total} | ok {ok} failed {failed} running {running}',
          hideCursor: true,
          clearOnComplete: true,
        },
        Presets.shades_classic,
      );
  let cursor = 0;
  let started = false;
  let closed = false;
  const result = handle.result();
  const outcome = result.then(
    () => undefined,
    () => undefined,
  );
  void outcome.then(() => (closed = true));
  const printEvents = async (): Promise<void> => {
    const page = await handle.events(cursor);
    cursor = page.nextCursor;
    for (const event of page.events) {
      const line = flags.json
        ? JSON.stringify(event)
        : `${new Date(event.at).toISOString().slice(11, 23)} ${event.type}${event.taskId ? ` ${event.taskId}` : ''}${event.detail ? `: ${event.detail}` : ''}`;
      if (bar && started) bar.stop();
      process.stdout.write(`${line}\n`);
      started = false;
    }
  };
  // Steps and tool calls of the run's agents (tasks with tools, and their sub-agents), each read on from its cursor; an
  // agent that finished since the last look is read once more for its last events, then left alone.
  const agentCursors = new Map<string, number>();
  const agentsDone = new Set<string>();
  const agentsFinished = new Set<string>();
  const printAgentEvents = async (progress: Awaited<ReturnType<typeof handle.progress>>): Promise<void> => {
    const include = (task: (typeof progress.tasks)[number]) => task.state !== 'pending' && !agentsDone.has(task.id);
    for (const { workflowId, progress: agent } of await runningAgents(
      handle.workflow.client,
      { workflowId: handle.workflowId, type: 'run', progress },
      { cursors: agentCursors, include, finished: agentsFinished },
    )) {
      for (const event of agent.events) {
        agentCursors.set(workflowId, event.seq);
        if (bar && started) bar.stop();
        started = false;
        process.stdout.write(
          `${flags.json ? JSON.stringify({ agent: workflowId, ...event }) : formatAgentEvent(agent.taskId, event)}\n`,
        );
      }
    }
    for (const task of progress.tasks) {
      if (task.agentWorkflowId === undefined || task.state === 'pending' || task.state === 'running') continue;
      agentsDone.add(task.id);
      agentsFinished.add(task.agentWorkflowId);
    }
  };
  // Queries are billed actions on Temporal Cloud; a free describe says whether the run moved since the last ones.
  const gate = new QueryGate(handle, { minIntervalMs: 2000 });
  while (!closed) {
    try {
      if (await gate.due()) {
        await printEvents();
        const progress = await handle.progress();
        if (progress.tasks.some((task) => task.agentWorkflowId !== undefined)) await printAgentEvents(progress);
        const payload = { ok: progress.succeeded, failed: progress.failed, running: progress.running };
        if (bar && !started) {
          bar.start(progress.total, progress.done, payload);
          started = true;
        } else bar?.update(progress.done, payload);
      }
    } catch {
      // a query can miss while a workflow task is being retried; the next one answers
    }
    await pause(500, outcome);
  }
  if (started) bar?.stop();
  started = false;
  // The last events (the final agents, run-finished) land with the close; a closed run still answers queries.
  await printEvents().catch(() => undefined);
  await handle
    .progress()
    .then((progress) =>
      progress.tasks.some((task) => task.agentWorkflowId !== undefined) ? printAgentEvents(progress) : undefined,
    )
    .catch(() => undefined);
  const { status } = await handle.describe();
  if (status !== 'COMPLETED')
    throw new CliError(`run ${handle.workflowId} ended ${status.toLowerCase()}`, ExitCode.agentsFailed);
  await printRunResult(handle, { json: flags.json }, result);
}

/** `fanout watch <id>`: a run's progress and events until it ends, then its results. */
export function watchCommand(): Command {
  return clientCommand(
    onRun(
      'watch',
      'progress bar and live events of a run until it ends, then its results',
      'print events and the result as JSON',
    ),
    (fanout, id, flags: WatchFlags) => watchRun(fanout.getHandle(id), flags),
  );
}
