import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { buildProgram, SUBCOMMAND_NAMES } from '../src/cli/program';
import { ROOT } from './support/paths';

const namesOf = (argv: string[]) => buildProgram(argv).commands.map((command) => command.name());

describe('the fanout program', () => {
  it('lists every subcommand, under the name it is loaded by, when the line names none', () => {
    expect(namesOf(['node', 'fanout', '--help'])).toEqual(SUBCOMMAND_NAMES);
    expect(namesOf(['node', 'fanout', 'help', 'batch'])).toEqual(SUBCOMMAND_NAMES);
    expect(namesOf(['node', 'fanout', 'bacth'])).toEqual(SUBCOMMAND_NAMES);
  });

  it('loads only the subcommand the line names', () => {
    for (const name of SUBCOMMAND_NAMES) expect(namesOf(['node', 'fanout', name, '--help'])).toEqual([name]);
  });

  it('builds a batch command without loading the worker, the local stack or a provider SDK', () => {
    const program = path.join(ROOT, 'dist', 'cli', 'program.js');
    const script = `require(${JSON.stringify(program)}).buildProgram(['node', 'fanout', 'batch', 'start']);
      process.stdout.write(JSON.stringify(Object.keys(require.cache)));`;
    const loaded = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as string[];
    expect(loaded.some((file) => file.endsWith(path.join('dist', 'cli', 'commands', 'batch.js')))).toBe(true);
    const heavy =
      /[/\\](dist[/\\](worker\.js|local[/\\]|llm[/\\])|node_modules[/\\](openai|@anthropic-ai|@temporalio[/\\]worker)[/\\])/;
    expect(loaded.filter((file) => heavy.test(file))).toEqual([]);
  });
});
