import type { BatchResultLine } from '../contract/batch';
import { childOf } from '../contract/location';
import type { ObjectStorage } from '../store';
import { logRecord } from './lane-journal';
import { linesOf } from './lines';
import { keptLines, spoolOf, spoolRoot } from './spool-layout';

/** Every spool beside a sink that did not finish (a batch terminated before it could write its sink). */
export async function leftoverSpools(storage: ObjectStorage, sink: string, except?: string): Promise<string[]> {
  const names = await storage.list(spoolRoot(sink));
  const epochs = new Set(names.filter((name) => name.includes('/')).map((name) => name.split('/')[0]));
  const finished = new Set(names.filter((name) => name.endsWith('/FINISHED.json')).map((name) => name.split('/')[0]));
  if (except !== undefined) epochs.delete(except);
  return [...epochs]
    .filter((epoch) => !finished.has(epoch))
    .sort()
    .map((epoch) => spoolOf(sink, epoch));
}

/**
 * Every result line a spool holds: kept lines, the lanes' segments and journal records, and the provider batches'
 * segments (a line may appear more than once).
 */
async function* spoolLines(storage: ObjectStorage, spool: string): AsyncGenerator<string> {
  for (const name of await storage.list(spool)) {
    // lanes/<lane>.log, or lanes/<lane>/journal.log in a spool from before the logs moved out of the lanes' directories.
    const log = /^lanes\/[^/]+\.log$/.test(name) || /^lanes\/[^/]+\/journal\.log$/.test(name);
    // provider/seg-part-<n>.jsonl: what a provider batch answered (the provider-batch route's segments).
    const segment = /^seg\/.+\.jsonl$/.test(name) || /^provider\/seg-part-\d+\.jsonl$/.test(name);
    if (!(log || segment || name === 'kept.jsonl' || /^lanes\/[^/]+\/\d+\.json$/.test(name))) continue;
    for await (const line of linesOf(storage, childOf(spool, name))) {
      // A journal log's records are `<index> <line>`, blank lines between them; a cut one is skipped.
      const text = log ? (line.text === undefined ? undefined : logRecord(line.text)?.line) : line.text;
      if (text !== undefined && text.trim() !== '') yield text;
    }
  }
}

/**
 * Writes into the sink what a batch stopped from outside (terminated, timed out) had recorded: every line of its spool,
 * one per id, then removes the spool. Returns the bytes written, or undefined when there was nothing to recover.
 */
export async function assembleLeftover(
  storage: ObjectStorage,
  sink: string,
  spool: string,
): Promise<number | undefined> {
  const names = await storage.list(spool);
  if (names.length === 0 || names.includes('FINISHED.json')) return undefined;
  const seen = new Set<string>();
  async function* unique(): AsyncGenerator<string> {
    for await (const text of spoolLines(storage, spool)) {
      const id = idOf(text);
      if (id === undefined || seen.has(id)) continue;
      seen.add(id);
      yield `${text}\n`;
    }
  }
  const bytes = await storage.writeStream(sink, unique());
  await storage.removeTree(spool);
  if ((await storage.list(spoolRoot(sink))).length === 0) await storage.removeTree(spoolRoot(sink));
  return bytes;
}

function idOf(text: string): string | undefined {
  try {
    return (JSON.parse(text) as BatchResultLine).id;
  } catch {
    return undefined; // a torn line from a crash: its item runs again
  }
}

function okLine(text: string): BatchResultLine | undefined {
  try {
    const line = JSON.parse(text) as BatchResultLine;
    return line.status === 'ok' ? line : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Prepares a resume: the ok lines (one per id) of the sink and of every spool a stopped run left are written, streamed,
 * as the new spool's kept lines. Nothing old is removed here (the new run removes the old spools once its sink is
 * whole), so a retried scan reads the same sources and writes the same kept lines. Returns the ids kept.
 */
export async function carryOkLines(storage: ObjectStorage, sink: string, spool: string): Promise<Set<string>> {
  const epoch = spool.slice(spoolRoot(sink).length + 1);
  const leftovers = await leftoverSpools(storage, sink, epoch);
  const seen = new Set<string>();
  async function* kept(): AsyncGenerator<string> {
    const fromSink = (async function* (): AsyncGenerator<string> {
      if ((await storage.size(sink)) === undefined) return;
      for await (const line of linesOf(storage, sink)) if (line.text !== undefined) yield line.text;
    })();
    for (const source of [fromSink, ...leftovers.map((old) => spoolLines(storage, old))]) {
      for await (const text of source) {
        const line = okLine(text);
        if (line && !seen.has(line.id)) {
          seen.add(line.id);
          yield `${text}\n`;
        }
      }
    }
  }
  await storage.writeStream(keptLines(spool), kept());
  return seen;
}

/** Removes the spools of stopped runs that a resume carried over (once the resume's sink is whole). */
export async function removeLeftovers(storage: ObjectStorage, sink: string, except: string): Promise<void> {
  for (const old of await leftoverSpools(storage, sink, except)) await storage.removeTree(old);
}
