import { Command } from 'commander';

/**
 * Every subcommand by name, in the order `fanout --help` lists them, each loaded only when asked for: loading them all
 * (the worker, the local stack, both provider SDKs) took a `fanout batch start` ~0.5 s before it could connect.
 */
const SUBCOMMANDS: ReadonlyArray<readonly [name: string, load: () => Command]> = [
  ['demo', () => (require('./commands/demo') as typeof import('./commands/demo')).demoCommand()],
  ['run', () => (require('./commands/run') as typeof import('./commands/run')).runCommand()],
  ['dev', () => (require('./commands/dev') as typeof import('./commands/dev')).devCommand()],
  ['status', () => (require('./commands/status') as typeof import('./commands/status')).statusCommand()],
  ['watch', () => (require('./commands/watch') as typeof import('./commands/watch')).watchCommand()],
  ['results', () => (require('./commands/results') as typeof import('./commands/results')).resultsCommand()],
  ['cancel', () => (require('./commands/cancel') as typeof import('./commands/cancel')).cancelCommand()],
  ['approve', () => (require('./commands/approve') as typeof import('./commands/approve')).approveCommand()],
  ['list', () => (require('./commands/list') as typeof import('./commands/list')).listCommand()],
  ['batch', () => (require('./commands/batch') as typeof import('./commands/batch')).batchCommand()],
  ['worker', () => (require('./commands/worker') as typeof import('./commands/worker')).workerCommand()],
  ['sim', () => (require('./commands/sim') as typeof import('./commands/sim')).simCommand()],
  [
    'codec-server',
    () => (require('./commands/codec-server') as typeof import('./commands/codec-server')).codecServerCommand(),
  ],
];

/** The names of `fanout`'s subcommands, in the order its help lists them. */
export const SUBCOMMAND_NAMES: readonly string[] = SUBCOMMANDS.map(([name]) => name);

/**
 * The `fanout` command and its subcommands. When `argv` (process.argv) names a subcommand, only that one is loaded:
 * commander parses a subcommand's arguments and prints its help without its siblings. Anything else (`--help`, `help
 * <name>`, a misspelt name, which commander answers with the nearest names) gets them all.
 */
export function buildProgram(argv: readonly string[] = process.argv): Command {
  const program = new Command('fanout')
    .description('durable parallel LLM agents on Temporal')
    .version(require('../../package.json').version as string)
    .exitOverride();
  const named = SUBCOMMANDS.filter(([name]) => name === argv[2]);
  for (const [, load] of named.length > 0 ? named : SUBCOMMANDS) {
    // Usage errors throw instead of exiting, so main() maps them to exit code 2 like any bad input.
    program.addCommand(load().exitOverride());
  }
  return program;
}
