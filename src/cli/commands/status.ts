import { Command } from 'commander';
import type { RunProgress } from '../../contract/fan-out';
import { clientCommand, onRun, type ConnectionFlags } from '../options';
import { formatCost, formatPacing } from '../report';
import { formatAgents, runningAgents } from '../agent-view';

interface StatusFlags extends ConnectionFlags {
  json?: boolean;
}

function formatProgress(progress: RunProgress): string {
  const states = progress.tasks.map(
    (task) => `  ${task.state.padEnd(9)} ${task.name}${task.attempts > 1 ? ` (${task.attempts} attempts)` : ''}`,
  );
  return [
    `${progress.done}/${progress.total} done: ok ${progress.succeeded}, failed ${progress.failed}, cancelled ${progress.cancelled}, skipped ${progress.skipped}; running ${progress.running}, pending ${progress.pending}`,
    `cost so far: ${formatCost(progress.cost)}`,
    ...formatPacing(progress.pacing),
    ...states,
  ].join('\n');
}

/** `fanout status <id>`: a run's counts and each agent's state (a batch's progress as JSON). */
export function statusCommand(): Command {
  return clientCommand(
    onRun('status', "state of a run: counts and each agent's state"),
    async (fanout, id, flags: StatusFlags) => {
      const { type, status } = await fanout.getHandle(id).describe();
      const progress = type === 'batch' || type === 'agent' ? undefined : await fanout.getHandle(id).progress();
      // Agents (tasks with tools, their sub-agents): steps, spend, and the tool calls that wait for a person.
      const agents =
        type === 'batch'
          ? []
          : await runningAgents(fanout.client.workflow, { workflowId: id, type, ...(progress ? { progress } : {}) });
      if (flags.json)
        process.stdout.write(
          `${JSON.stringify({ id, type, status, progress: type === 'batch' ? await fanout.getBatch(id).progress() : progress, agents })}\n`,
        );
      else if (type === 'batch')
        process.stdout.write(
          `${type} ${id}: ${status.toLowerCase()}\n${JSON.stringify(await fanout.getBatch(id).progress())}\n`,
        );
      else
        process.stdout.write(
          `${type} ${id}: ${status.toLowerCase()}\n${[...(progress ? [formatProgress(progress)] : []), ...formatAgents(agents)].join('\n')}\n`,
        );
    },
  );
}
