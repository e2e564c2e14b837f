import { execFileSync } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BatchResultLine } from '../src/contract/batch';
import { assembleSink, carryOkLines, spoolOf, writeSegment, type FlushItem } from '../src/batch/result-sink';
import { FileStorage } from '../src/store';
import { ROOT } from './support/paths';

const storage = new FileStorage();
const directory = mkdtempSync(path.join(tmpdir(), 'fanout-sink-'));

const ok = (id: string, output = `answer ${id}`): FlushItem => ({ line: { id, status: 'ok', output, attempts: 1, durationMs: 1 } });

function sinkLines(file: string): BatchResultLine[] {
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as BatchResultLine);
}

describe('the result sink', () => {
  it('stays exactly-once when a stale flush attempt lands after the next flush', async () => {
    const sink = path.join(directory, 'stale.jsonl');
    const spool = spoolOf(sink, 'run-1');
    // Flush 0's first attempt stalls (its heartbeat times out); Temporal retries it, the retry writes segment 0, and
    // flush 1 writes segment 1. Then the stale first attempt wakes and writes segment 0 once more.
    const first = [ok('a'), ok('b')];
    await writeSegment(storage, spool, 0, first);
    await writeSegment(storage, spool, 1, [ok('c')]);
    await writeSegment(storage, spool, 0, first);
    await assembleSink(storage, sink, spool, 2);
    expect(sinkLines(sink).map((line) => line.id)).toEqual(['a', 'b', 'c']);
    // Assembling again (a retried finish after the spool was removed) leaves the sink as it is.
    await assembleSink(storage, sink, spool, 2);
    expect(sinkLines(sink).map((line) => line.id)).toEqual(['a', 'b', 'c']);
  });

  it('carries ok lines over for a resume, once per id, from the sink and from a spool a terminated run left', async () => {
    const sink = path.join(directory, 'resume.jsonl');
    const old = spoolOf(sink, 'run-old');
    await writeSegment(storage, old, 0, [ok('a'), { line: { id: 'b', status: 'failed', error: { type: 'X', message: 'x' }, attempts: 5, durationMs: 1 } }]);
    await assembleSink(storage, sink, old, 1);
    const terminated = spoolOf(sink, 'run-terminated');
    await writeSegment(storage, terminated, 0, [ok('a'), ok('c')]);
    const next = spoolOf(sink, 'run-new');
    expect(await carryOkLines(storage, sink, next)).toBe(2);
    await writeSegment(storage, next, 1, [ok('b')]);
    await assembleSink(storage, sink, next, 2);
    expect(sinkLines(sink).map((line) => line.id).sort()).toEqual(['a', 'b', 'c']);
    expect(await storage.list(`${sink}.parts`)).toEqual([]);
  });

  it('resumes a sink far larger than the memory it is given, by streaming it', async () => {
    const sink = path.join(directory, 'huge.jsonl');
    const out = createWriteStream(sink);
    const output = 'x'.repeat(2000);
    // ~240 MB of results, read by a process whose heap may not exceed 64 MB.
    for (let index = 0; index < 120_000; index += 1) {
      if (!out.write(`${JSON.stringify({ id: `h${index}`, status: 'ok', output, attempts: 1, durationMs: 1 })}\n`)) await once(out, 'drain');
    }
    out.end();
    await once(out, 'finish');
    const script = `
      const { carryOkLines, spoolOf } = require(${JSON.stringify(path.join(ROOT, 'dist', 'batch', 'result-sink.js'))});
      const { FileStorage } = require(${JSON.stringify(path.join(ROOT, 'dist', 'store', 'index.js'))});
      carryOkLines(new FileStorage(), process.argv[1], spoolOf(process.argv[1], 'resume'))
        .then((kept) => console.log(JSON.stringify({ kept, peakMb: Math.round(process.memoryUsage().heapUsed / 1e6) })))
        .catch((error) => { console.error(error); process.exit(1); });`;
    const printed = execFileSync(process.execPath, ['--max-old-space-size=64', '-e', script, sink], { encoding: 'utf8' });
    expect(JSON.parse(printed)).toMatchObject({ kept: 120_000 });
  }, 180_000);
});
