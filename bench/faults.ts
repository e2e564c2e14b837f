/**
 * `npm run bench`: the long seeded fault schedule. Runs test/fault-schedule.test.ts with FANOUT_FAULT_RUNS batches
 * (default 8) and writes what each batch went through to docs/BENCHMARKS.md (between the faults markers).
 *
 *   tsx bench/faults.ts [--runs N] [--seed S]
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = path.resolve(__dirname, '..');
const { values } = parseArgs({ options: { runs: { type: 'string', default: '8' }, seed: { type: 'string' } } });
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
    env: { ...process.env, FANOUT_FAULT_RUNS: String(runs), FANOUT_FAULT_SEED: seed },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  },
);
const output = `${jest.stdout}\n${jest.stderr}`;
const batches = output
  .split('\n')
  .filter((line) => /^\s*seed \d+ batch \d+/.test(line))
  .map((line) => `- ${line.trim()}`);
const verdict =
  jest.status === 0
    ? `every batch passed every check`
    : `FAILED (jest exited ${jest.status}); replay with FANOUT_FAULT_SEED=${seed}`;
const section = [
  '## Seeded fault schedule (durability)',
  '',
  `Command: \`tsx bench/faults.ts --runs ${runs} --seed ${seed}\` (${startedAt.toISOString()}; test/fault-schedule.test.ts with FANOUT_FAULT_RUNS=${runs}).`,
  'Each batch runs on two worker processes whose store fails 2% of its calls, while the schedule SIGKILLs a worker, SIGKILLs',
  'and restarts the file-backed dev server, or cancels and resumes, at points drawn from the seed. Checked from the',
  "simulator's own log after each: every id exactly once in the sink, no call answered before a fault sent again, ids sent",
  'twice no more than the calls open at the faults, nothing open at the end, every answered call in the sink.',
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
if (jest.status !== 0) process.exit(1);
