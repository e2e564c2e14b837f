import { PageReader } from '../src/workflows/batch/page-reader';
import type { BatchEntry } from '../src/contract/batch';

const entry = (id: string, agent = false): BatchEntry => ({
  id,
  offset: 0,
  length: 1,
  ...(agent ? { agent: true } : {}),
});

function readerOf(entries: BatchEntry[]): PageReader {
  const io = { readBatchPage: () => Promise.reject(new Error('no page reads here')) };
  return new PageReader(
    io,
    { file: 'f', fileBytes: 1, cursor: 0, pageSize: 10 },
    { entries, nextOffset: 1, eof: true },
    () => undefined,
  );
}

describe("the window's next lane (PageReader.takeNext)", () => {
  it('takes up to the count from a page without agents', () => {
    const reader = readerOf(['a', 'b', 'c', 'd', 'e'].map((id) => entry(id)));
    expect(reader.takeNext(3).map((taken) => taken.id)).toEqual(['a', 'b', 'c']);
    expect(reader.takeNext(3).map((taken) => taken.id)).toEqual(['d', 'e']);
  });

  it('ends a lane before an agent, takes the agent alone, and holds it while the window has no room for agents', () => {
    const reader = readerOf([entry('a'), entry('b'), entry('agent-1', true), entry('agent-2', true), entry('c')]);
    expect(reader.takeNext(10).map((taken) => taken.id)).toEqual(['a', 'b']);
    expect(reader.takeNext(10, false)).toEqual([]);
    expect(reader.buffered()).toBe(3);
    expect(reader.takeNext(10).map((taken) => taken.id)).toEqual(['agent-1']);
    expect(reader.takeNext(10).map((taken) => taken.id)).toEqual(['agent-2']);
    expect(reader.takeNext(10).map((taken) => taken.id)).toEqual(['c']);
  });
});
