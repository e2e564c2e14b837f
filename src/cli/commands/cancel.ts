import { Command } from 'commander';
import { withClient, withConnection, type ConnectionFlags } from '../options';

/** `fanout cancel <id>`: requests a run's cancellation. */
export function cancelCommand(): Command {
  return withConnection(
    new Command('cancel').description('cancel a run: every agent it started is cancelled and stops').argument('<id>'),
  ).action(async (id: string, flags: ConnectionFlags) =>
    withClient(flags, async (fanout) => {
      await fanout.getHandle(id).cancel();
      process.stdout.write(`cancel requested for ${id}\n`);
    }),
  );
}
