import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ENVIRONMENT_VARIABLES, type VariableReader } from '../src/config/environment-variables';
import { FANOUT_WORKER_DEFAULTS } from '../src/worker';
import { ROOT } from './support/paths';

const LIST_FILE = path.join(ROOT, 'src', 'config', 'environment-variables.ts');

function filesUnder(directory: string, extensions: readonly string[]): string[] {
  return readdirSync(directory, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && extensions.some((extension) => entry.name.endsWith(extension)))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

function textOf(files: readonly string[]): string {
  return files.map((file) => readFileSync(file, 'utf8')).join('\n');
}

/** README's rows of the tables whose first column is `variable`. */
function readmeVariableRows(): string[] {
  const rows: string[] = [];
  let inTable = false;
  for (const line of readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n')) {
    if (!line.startsWith('|')) inTable = false;
    else if (/^\| variable \|/.test(line)) inTable = true;
    else if (inTable && !line.startsWith('| ---')) rows.push(line);
  }
  return rows;
}

const NAME = /`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`/g;

function namesIn(text: string): string[] {
  return [...text.matchAll(NAME)].map((match) => match[1]);
}

/**
 * The variables src/ reads by name: `process.env.X`, `environment.X` and `environment['X']` (every `xFromEnvironment`
 * names its parameter `environment`), and string literals of our prefixes (`integerFromEnvironment('FANOUT_X')`,
 * commander's `.env('TEMPORAL_ADDRESS')`, a constant holding a name).
 */
function variablesReadBySource(): Set<string> {
  const names = new Set<string>();
  const patterns = [
    /\b(?:process\.env|environment|env)\??\.([A-Z][A-Z0-9_]*[A-Z0-9])\b/g,
    /\b(?:process\.env|environment|env)\[\s*['"`]([A-Z][A-Z0-9_]*[A-Z0-9])['"`]\s*\]/g,
    /['"`]((?:FANOUT|TEMPORAL|OPENAI|ANTHROPIC|AWS|POSTGRES|SEAWEEDFS)_[A-Z0-9_]*[A-Z0-9])['"`]/g,
  ];
  for (const file of filesUnder(path.join(ROOT, 'src'), ['.ts'])) {
    if (file === LIST_FILE) continue;
    const text = readFileSync(file, 'utf8');
    for (const pattern of patterns) for (const match of text.matchAll(pattern)) names.add(match[1]);
  }
  return names;
}

const listed = new Set<string>(Object.values(ENVIRONMENT_VARIABLES).flat());
const documented = new Set<string>(
  Object.entries(ENVIRONMENT_VARIABLES)
    .filter(([reader]) => reader !== 'internal')
    .flatMap(([, names]) => names),
);

describe("README's environment tables and the code's list of variables", () => {
  const rows = readmeVariableRows();

  it('finds the tables', () => {
    expect(rows.length).toBeGreaterThan(40);
  });

  it('lists every variable README documents', () => {
    const inFirstColumn = rows.flatMap((row) => namesIn(row.split('|')[1]));
    expect(inFirstColumn.filter((name) => !documented.has(name))).toEqual([]);
  });

  it('has every listed variable documented in README', () => {
    const mentioned = new Set(rows.flatMap(namesIn));
    expect([...documented].filter((name) => !mentioned.has(name))).toEqual([]);
  });

  it('lists every variable the source reads', () => {
    expect([...variablesReadBySource()].filter((name) => !listed.has(name)).sort()).toEqual([]);
  });

  it('lists a variable only where something reads it', () => {
    const source = textOf(filesUnder(path.join(ROOT, 'src'), ['.ts']).filter((file) => file !== LIST_FILE));
    const readers: Partial<Record<VariableReader, string>> = {
      source,
      internal: source,
      envconfig: textOf(filesUnder(path.join(ROOT, 'node_modules', '@temporalio', 'envconfig', 'lib'), ['.js'])),
      scripts: textOf(filesUnder(path.join(ROOT, 'scripts'), ['.sh', '.ts', '.js'])),
      tests: textOf(filesUnder(path.join(ROOT, 'test'), ['.ts']).filter((file) => file !== __filename)),
      bench: textOf(filesUnder(path.join(ROOT, 'bench'), ['.ts', '.js'])),
      anthropicSdk: readFileSync(path.join(ROOT, 'node_modules', '@anthropic-ai', 'sdk', 'client.js'), 'utf8'),
      // awsSdk: read by the SDK's credential and endpoint providers, spread over many packages.
    };
    const unread = Object.entries(readers).flatMap(([reader, text]) =>
      ENVIRONMENT_VARIABLES[reader as VariableReader]
        .filter((name) => !new RegExp(`\\b${name}\\b`).test(text))
        .map((name) => `${reader}: ${name}`),
    );
    expect(unread).toEqual([]);
  });

  it("states the worker's defaults as FANOUT_WORKER_DEFAULTS has them", () => {
    const defaultOf = (name: string) =>
      rows
        .find((row) => row.split('|')[1].includes(`\`${name}\``))
        ?.split('|')[3]
        .trim();
    expect({
      FANOUT_MAX_CONCURRENT_ACTIVITIES: defaultOf('FANOUT_MAX_CONCURRENT_ACTIVITIES'),
      FANOUT_ACTIVITY_POLLERS: defaultOf('FANOUT_ACTIVITY_POLLERS'),
      FANOUT_HEARTBEAT_THROTTLE_MS: defaultOf('FANOUT_HEARTBEAT_THROTTLE_MS'),
      FANOUT_SHUTDOWN_GRACE_MS: defaultOf('FANOUT_SHUTDOWN_GRACE_MS'),
    }).toEqual({
      FANOUT_MAX_CONCURRENT_ACTIVITIES: `\`${FANOUT_WORKER_DEFAULTS.maxConcurrentActivities}\``,
      FANOUT_ACTIVITY_POLLERS: `\`${FANOUT_WORKER_DEFAULTS.activityPollers}\``,
      FANOUT_HEARTBEAT_THROTTLE_MS: `\`${FANOUT_WORKER_DEFAULTS.heartbeatThrottleMs}\``,
      FANOUT_SHUTDOWN_GRACE_MS: `\`${FANOUT_WORKER_DEFAULTS.shutdownGraceMs}\``,
    });
  });
});
