import { Command } from 'commander';
import { FANOUT_CLIENT_DEFAULTS, RUN_TYPES } from '../../client/fanout-client';
import { CliError, ExitCode } from '../errors';
import { wholeNumber, withClient, withConnection, type ConnectionFlags } from '../options';

interface ListFlags extends ConnectionFlags {
  name?: string;
  json?: boolean;
  limit?: number;
}

/** `fanout list`: recent runs, newest first. */
export function listCommand(): Command {
  return withConnection(
    new Command('list')
      .description(`recent runs (${RUN_TYPES.join(', ')}), newest first`)
      .option('--limit <n>', 'how many', wholeNumber(1, 1000), FANOUT_CLIENT_DEFAULTS.listLimit)
      .option('--name <name>', 'only runs of this name (search attribute FanoutName)')
      .option('--json', 'print JSON'),
  ).action(async (flags: ListFlags) =>
    withClient(flags, async (fanout) => {
      if (flags.name !== undefined && !(await fanout.hasNameAttribute())) {
        throw new CliError(
          'this namespace has no FanoutName search attribute; register it with `temporal operator search-attribute create --name FanoutName --type Keyword`',
          ExitCode.badInput,
        );
      }
      const runs = await fanout.listRuns({ limit: flags.limit, name: flags.name });
      const rows = runs.map((run) => ({
        id: run.workflowId,
        type: run.type,
        status: run.status,
        startTime: run.startTime.toISOString(),
      }));
      if (flags.json) process.stdout.write(`${JSON.stringify(rows)}\n`);
      else
        process.stdout.write(
          rows.map((row) => `${row.startTime}  ${row.status.padEnd(10)} ${row.type.padEnd(11)} ${row.id}`).join('\n') +
            (rows.length ? '\n' : 'no runs\n'),
        );
    }),
  );
}
