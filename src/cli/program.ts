import { Command } from 'commander';
import { batchCommand } from './commands/batch';
import { cancelCommand } from './commands/cancel';
import { codecServerCommand } from './commands/codec-server';
import { demoCommand } from './commands/demo';
import { devCommand } from './commands/dev';
import { listCommand } from './commands/list';
import { resultsCommand } from './commands/results';
import { runCommand } from './commands/run';
import { simCommand } from './commands/sim';
import { statusCommand } from './commands/status';
import { watchCommand } from './commands/watch';
import { workerCommand } from './commands/worker';
import { approveCommand } from './commands/approve';

/** The `fanout` command and its subcommands. */
export function buildProgram(): Command {
  const program = new Command('fanout')
    .description('durable parallel LLM agents on Temporal')
    .version(require('../../package.json').version as string)
    .exitOverride();
  for (const command of [
    demoCommand(),
    runCommand(),
    devCommand(),
    statusCommand(),
    watchCommand(),
    resultsCommand(),
    cancelCommand(),
    approveCommand(),
    listCommand(),
    batchCommand(),
    workerCommand(),
    simCommand(),
    codecServerCommand(),
  ]) {
    // Usage errors throw instead of exiting, so main() maps them to exit code 2 like any bad input.
    program.addCommand(command.exitOverride());
  }
  return program;
}
