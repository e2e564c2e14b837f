import { Command } from 'commander';
import type { RunProgress } from '../../contract/fan-out';
import { withClient, withConnection, type ConnectionFlags } from '../options';
import { formatCost, formatPacing } from '../report';

interface StatusFlags extends ConnectionFlags {
  json?: boolean;
}

function formatProgress(progress: RunProgress): string {
  const states = progress.tasks.map((task) => `  ${task.state.padEnd(9)} ${task.name}${task.attempts > 1 ? ` (${task.attempts} attempts)` : ''}`);
  return [
    `${progress.done}/${progress.total} done: ok ${progress.succeeded}, failed ${progress.failed}, cancelled ${progress.cancelled}, skipped ${progress.skipped}; running ${progress.running}, pending ${progress.pending}`,
    `cost so far: ${formatCost(progress.cost)}`,
    ...formatPacing(progress.pacing),
    ...states,
  ].join('\n');
}

/** `fanout status <id>`: a run's counts and each agent's state (a batch's progress as JSON). */
export function statusCommand(): Command {
  return withConnection(new Command('status').description("state of a run: counts and each agent's state").argument('<id>').option('--json', 'print JSON')).action(
    async (id: string, flags: StatusFlags) =>
      withClient(flags, async (fanout) => {
        const { type, status } = await fanout.getHandle(id).describe();
        const progress = type === 'batch' ? await fanout.getBatch(id).progress() : await fanout.getHandle(id).progress();
        if (flags.json) process.stdout.write(`${JSON.stringify({ id, type, status, progress })}\n`);
        else process.stdout.write(`${type} ${id}: ${status.toLowerCase()}\n${type === 'batch' ? JSON.stringify(progress) : formatProgress(progress as RunProgress)}\n`);
      }),
  );
}
