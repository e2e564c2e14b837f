import { childOf } from '../contract/location';

/*
 * The spool: where a batch keeps its results until they are in the sink. One per chain of runs, beside the sink:
 * `<sink>.parts/<first run id>/`, so a resume never mixes its results with those of the run it resumes.
 *
 *   kept.jsonl                ok lines a resume carried over from the sink and from spools of stopped runs
 *   todo.jsonl                a resume's task lines still to run (the source, less what is ok)
 *   lanes/<lane>.log          the lane's finished items, one `<index> <line>` record appended as each call answers:
 *                             the journal, where the store can append (local files). One file in a directory every
 *                             lane shares: a directory per lane cost a mkdir per lane, about a tenth of the worker's
 *                             file-system CPU (spools from before it keep theirs in lanes/<lane>/journal.log, still read)
 *   lanes/<lane>/<index>.json one finished item of a lane, where it cannot append (S3), or when an append failed
 *   seg/<lane>.jsonl          every finished item of a lane, written when the lane ends: the segment
 *   FINISHED.json             written once the sink is whole, before anything else of the spool is removed
 *
 * Every name is fixed by the lane and the item's place in it, so a retried or stale attempt rewrites the same object
 * with the same line, or appends a record of an index the journal may hold already (the first one read counts):
 * nothing twice, on any number of machines; a record cut short by a crash is skipped (its call was in flight). Journal records stay until the batch
 * finishes, so a segment written later (by any attempt) holds at least what an earlier one did.
 */

export function spoolRoot(sink: string): string {
  return `${sink}.parts`;
}

export function spoolOf(sink: string, epoch: string): string {
  return childOf(spoolRoot(sink), epoch);
}

export function keptLines(spool: string): string {
  return childOf(spool, 'kept.jsonl');
}

export function todoFile(spool: string): string {
  return childOf(spool, 'todo.jsonl');
}

export function finishedMark(spool: string): string {
  return childOf(spool, 'FINISHED.json');
}

export function journalOf(spool: string, lane: string): string {
  return childOf(childOf(spool, 'lanes'), lane);
}

export function segmentOf(spool: string, lane: string): string {
  return childOf(childOf(spool, 'seg'), `${lane}.jsonl`);
}

/** The journal log of a lane: one file beside every other lane's. */
export function journalLogOf(spool: string, lane: string): string {
  return childOf(childOf(spool, 'lanes'), `${lane}.log`);
}

/** The journal log's name in a lane's directory, where spools from before `journalLogOf` keep it. */
export const JOURNAL_LOG = 'journal.log';
