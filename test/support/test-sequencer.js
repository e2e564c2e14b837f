// Runs the slowest test files first, by the seconds each took in a recorded run (timings.json, `npm run test:timings`),
// so that the workers end together instead of one starting a three-minute file when the others have nothing left.
// A file with no recorded time (a new one) goes first: it may be slow, and it runs early where that costs least.
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;
const timings = require('./timings.json');

const ROOT = path.resolve(__dirname, '..', '..');

/** Files that keep both cores busy for minutes: worker-heap's batch of 20,000 calls as fast as the machine goes. */
const SATURATING = new Set(['test/worker-heap.test.ts']);
/**
 * Files whose assertions time what they run closely (batch-lanes: no moment without a call in flight across a window
 * hand-over of a few hundred ms): beside a saturating file they fail. They start only once, by the recorded times, the
 * saturating files have ended (with room for a slower machine), unless nothing else is left to start.
 */
const TIMED = new Set(['test/batch-lanes.test.ts']);
/** How much longer than recorded a saturating file is assumed to run. */
const ROOM = 1.5;
/** What a file with no recorded time is assumed to take when placing the timed files. */
const UNKNOWN_SECONDS = 60;

const nameOf = (test) => path.relative(ROOT, test.path).split(path.sep).join('/');

class SlowestFirst extends Sequencer {
  constructor(options) {
    super(options);
    this.workers = Math.max(1, options.globalConfig?.maxWorkers ?? 1);
  }

  sort(tests) {
    const seconds = (test) => timings[nameOf(test)] ?? Infinity;
    const pending = [...tests].sort((a, b) => seconds(b) - seconds(a) || a.path.localeCompare(b.path));
    // Hand the files out as jest will, to the worker free first, in a schedule of recorded times.
    const freeAt = Array.from({ length: this.workers }, () => 0);
    let saturatedUntil = 0;
    const order = [];
    while (pending.length > 0) {
      const worker = freeAt.indexOf(Math.min(...freeAt));
      const now = freeAt[worker];
      const next = pending.findIndex((test) => !TIMED.has(nameOf(test)) || now >= saturatedUntil);
      const [test] = pending.splice(Math.max(next, 0), 1);
      order.push(test);
      const duration = Number.isFinite(seconds(test)) ? seconds(test) : UNKNOWN_SECONDS;
      freeAt[worker] = now + duration;
      if (SATURATING.has(nameOf(test))) saturatedUntil = Math.max(saturatedUntil, now + duration * ROOM);
    }
    return order;
  }
}

module.exports = SlowestFirst;
