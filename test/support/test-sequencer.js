// Runs the slowest test files first, by the seconds each took in a recorded run (timings.json, `npm run test:timings`),
// so that two workers end together instead of one starting a three-minute file when the other has nothing left.
// A file with no recorded time (a new one) goes first: it may be slow, and it runs early where that costs least.
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;
const timings = require('./timings.json');

const ROOT = path.resolve(__dirname, '..', '..');

class SlowestFirst extends Sequencer {
  sort(tests) {
    const seconds = (test) => timings[path.relative(ROOT, test.path).split(path.sep).join('/')] ?? Infinity;
    return [...tests].sort((a, b) => seconds(b) - seconds(a) || a.path.localeCompare(b.path));
  }
}

module.exports = SlowestFirst;
