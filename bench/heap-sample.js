'use strict';
/**
 * A probe for `fanout worker`'s re-launched child, loaded with `--require` in each of its threads: every 250 ms it
 * appends the thread's V8 heap (committed, used, by space) to $HEAP_SAMPLE_DIR/<pid>.log, and on the main thread the
 * process's RSS split into anonymous and file-backed pages. Where a worker's peak RSS goes, sampled beside its run:
 *
 *   tsx bench/worker-memory.ts --variant "probe=--require=$PWD/bench/heap-sample.js HEAP_SAMPLE_DIR=/tmp/heap"
 *
 * Only the child samples (the launcher stays bare). It costs the worker some CPU; compare peaks, not CPU, with it on.
 */
const { appendFileSync, readFileSync } = require('node:fs');
const path = require('node:path');
const v8 = require('node:v8');
const { isMainThread, threadId } = require('node:worker_threads');

const directory = process.env.HEAP_SAMPLE_DIR;
if (directory && process.env.FANOUT_HEAP_CAPPED === '1') {
  const file = path.join(directory, `${process.pid}.log`);
  const mb = (bytes) => (bytes / 1048576).toFixed(1);
  const statusMb = (status, field) =>
    (Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024).toFixed(1);
  const timer = setInterval(() => {
    const heap = v8.getHeapStatistics();
    let processFigures = '';
    if (isMainThread) {
      const status = readFileSync('/proc/self/status', 'utf8');
      processFigures = ` rss=${statusMb(status, 'VmRSS')} anon=${statusMb(status, 'RssAnon')} file=${statusMb(status, 'RssFile')} hwm=${statusMb(status, 'VmHWM')}`;
    }
    const spaces = v8
      .getHeapSpaceStatistics()
      .map((space) => `${space.space_name.replace('_space', '')}=${mb(space.space_size)}`)
      .join(' ');
    appendFileSync(
      file,
      `${Date.now()} thread=${threadId} committed=${mb(heap.total_heap_size)} used=${mb(heap.used_heap_size)}${processFigures} ${spaces}\n`,
    );
  }, 250);
  timer.unref();
}
