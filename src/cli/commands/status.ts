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
    `cost so far: ${formatCost(progress.cost)}${progress.cachedTokens === undefined ? '' : `, ${progress.cachedTokens} prompt tokens served from the provider's cache`}`,
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
      const batchProgress = type === 'batch' ? await fanout.getBatch(id).progress() : undefined;
      // Agents (tasks with tools, a batch's agent items, their sub-agents): steps, spend, and the calls that wait.
      const agents = await runningAgents(fanout.client.workflow, {
        workflowId: id,
        type,
        ...(progress ? { progress } : {}),
        ...(batchProgress?.runningAgents ? { batchAgents: batchProgress.runningAgents } : {}),
      });
      if (flags.json)
        process.stdout.write(`${JSON.stringify({ id, type, status, progress: batchProgress ?? progress, agents })}\n`);
      else if (type === 'batch')
        process.stdout.write(
          `${type} ${id}: ${status.toLowerCase()}\n${[JSON.stringify(batchProgress), ...formatAgents(agents)].join('\n')}\n`,
        );
      else
        process.stdout.write(
          `${type} ${id}: ${status.toLowerCase()}\n${[...(progress ? [formatProgress(progress)] : []), ...formatAgents(agents)].join('\n')}\n`,
        );
    },
  );
}
