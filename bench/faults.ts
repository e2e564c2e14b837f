/**
 * `npm run bench`: the long seeded fault schedule. Runs test/fault-schedule.test.ts on `--runs` random seeds in a row
 * (default 20: FANOUT_FAULT_SEED, +1, ...; the fixed seeds `npm test` runs left out) and writes what each went through,
 * how many passed and how long it took to docs/BENCHMARKS.md (between the faults markers).
 *
 *   tsx bench/faults.ts [--runs N] [--seed S]
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = path.resolve(__dirname, '..');
const { values } = parseArgs({ options: { runs: { type: 'string', default: '20' }, seed: { type: 'string' } } });
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1)
  throw new TypeError(`--runs must be a whole number of at least 1, got ${values.runs}`);
const seed = values.seed ?? String(Math.floor(Math.random() * 1e9));

const startedAt = new Date();
const jest = spawnSync(
  process.execPath,
  [path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js'), 'test/fault-schedule.test.ts'],
  {
    cwd: ROOT,
    env: { ...process.env, FANOUT_FAULT_RUNS: String(runs), FANOUT_FAULT_SEED: seed, FANOUT_FAULT_FIXED: '0' },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  },
);
const minutes = ((Date.now() - startedAt.getTime()) / 60_000).toFixed(1);
const output = `${jest.stdout}\n${jest.stderr}`;
const batches = output
  .split('\n')
  .filter((line) => /^\s*seed \d+/.test(line))
  .map((line) => `- ${line.trim()}`);
const passed = output.split('\n').filter((line) => /✓ .*\(seed \d+/.test(line)).length;
const failed = output
  .split('\n')
  .flatMap((line) => /✕ .*\(seed (\d+)/.exec(line)?.[1] ?? [])
  .map((failure) => `FANOUT_FAULT_SEED=${failure}`);
const verdict =
  jest.status === 0
    ? `${passed} of ${runs} seeds passed every check, in ${minutes} min`
    : `${passed} of ${runs} seeds passed, in ${minutes} min (jest exited ${jest.status}); replay a failed one with ${failed.join(', ') || `FANOUT_FAULT_SEED=${seed}`} FANOUT_FAULT_FIXED=0`;
const section = [
  '## Seeded fault schedule (durability)',
  '',
  `Command: \`tsx bench/faults.ts --runs ${runs} --seed ${seed}\` (${startedAt.toISOString()}; test/fault-schedule.test.ts with FANOUT_FAULT_RUNS=${runs} FANOUT_FAULT_FIXED=0).`,
  'Each seed runs one batch on two worker processes whose store fails 2% of its calls: in three stripes whose windows hand',
  'over and lend (short calls on a local disk, or long ones on S3) through three faults drawn from a worker SIGKILL, a',
  'SIGKILL and restart of the file-backed dev server, and a cancel and resume; or with a token budget that runs out',
  'after a worker SIGKILL, then resumed; or through `route: provider-batch`, its worker SIGKILLed in some of its upload,',
  "create, poll and download. Checked from the simulator's own log after each: every id exactly once in the sink, no call",
  'answered before a fault sent again, none written before a cancel or budget stop reached the batch (its first abort)',
  'sent again, no call started by a lane (one worker, one window) once the stop had aborted one of its calls (those',
  'other lanes started after the first abort are counted below), after each kill no more ids sent again than the killed',
  "worker had open and none of the survivors', each provider part created once and no item answered by the provider and",
  'sent sync, nothing open at the end.',
  '',
  ...batches,
  '',
  `Result: ${verdict}.`,
].join('\n');
const target = path.join(ROOT, 'docs', 'BENCHMARKS.md');
const block = `<!-- faults:start -->\n${section}\n<!-- faults:end -->`;
const existing = existsSync(target) ? readFileSync(target, 'utf8') : '# Benchmarks\n';
const pattern = /<!-- faults:start -->[\s\S]*?<!-- faults:end -->/;
writeFileSync(
  target,
  pattern.test(existing) ? existing.replace(pattern, () => block) : `${existing.trimEnd()}\n\n${block}\n`,
);
process.stdout.write(`${section}\n`);
if (jest.status !== 0) {
  // What each failed seed's judge said: jest's failure blocks, from the first one on.
  const first = output.indexOf('  ● ');
  process.stdout.write(`\n${first < 0 ? output : output.slice(first)}\n`);
  process.exit(1);
}
