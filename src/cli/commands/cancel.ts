import { Command } from 'commander';
import { clientCommand } from '../options';

/** `fanout cancel <id>`: requests a run's cancellation. */
export function cancelCommand(): Command {
  return clientCommand(
    new Command('cancel').description('cancel a run: every agent it started is cancelled and stops').argument('<id>'),
    async (fanout, id) => {
      await fanout.getHandle(id).cancel();
      process.stdout.write(`cancel requested for ${id}\n`);
    },
  );
}
