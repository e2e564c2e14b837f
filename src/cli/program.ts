import { Command } from 'commander';
import { demoCommand } from './commands/demo';
import { runCommand } from './commands/run';
import { simCommand } from './commands/sim';
import { workerCommand } from './commands/worker';

/** The `fanout` command and its subcommands. */
export function buildProgram(): Command {
  const program = new Command('fanout')
    .description('durable parallel LLM agents on Temporal')
    .version(require('../../package.json').version as string)
    .showHelpAfterError('(add --help for usage)');
  program.addCommand(demoCommand()).addCommand(runCommand()).addCommand(workerCommand()).addCommand(simCommand());
  return program;
}
