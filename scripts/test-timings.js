// Records how long each test file takes, for the test sequencer (test/support/test-sequencer.js starts the slowest first).
//   node scripts/test-timings.js                   runs the whole suite (jest --json) and writes test/support/timings.json
//   node scripts/test-timings.js --from run.json   writes it from the --json output of a run you already have
// Any extra arguments go to jest. Times are wall seconds per file, from one run: noisy, but the order is what matters.
const { spawnSync } = require('node:child_process');
const { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const OUT = path.join(ROOT, 'test', 'support', 'timings.json');

function jestJson(args) {
  const from = args.indexOf('--from');
  if (from >= 0) return JSON.parse(readFileSync(path.resolve(args[from + 1]), 'utf8'));
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'fanout-timings-'));
  try {
    const output = path.join(scratch, 'jest.json');
    const jest = require.resolve('jest/bin/jest');
    const run = spawnSync(process.execPath, [jest, '--json', `--outputFile=${output}`, ...args], {
      cwd: ROOT,
      stdio: 'inherit',
    });
    if (run.status !== 0) {
      // process.exit skips `finally`: the scratch directory goes first.
      rmSync(scratch, { recursive: true, force: true });
      console.error('test-timings: the run failed; timings.json is left as it was');
      process.exit(run.status ?? 1);
    }
    return JSON.parse(readFileSync(output, 'utf8'));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

const results = jestJson(process.argv.slice(2)).testResults;
// Files this run did not include keep their recorded times.
let timings = {};
try {
  timings = JSON.parse(readFileSync(OUT, 'utf8'));
} catch {
  // none recorded yet
}
for (const file of results) {
  const name = path.relative(ROOT, file.name).split(path.sep).join('/');
  timings[name] = Math.round((file.endTime - file.startTime) / 100) / 10;
}
// Files that no longer exist are dropped.
const sorted = Object.fromEntries(
  Object.entries(timings)
    .filter(([name]) => existsSync(path.join(ROOT, name)))
    .sort(([a], [b]) => a.localeCompare(b)),
);
writeFileSync(OUT, `${JSON.stringify(sorted, null, 2)}\n`);
console.log(`test-timings: ${results.length} files timed, written to ${path.relative(ROOT, OUT)}`);
