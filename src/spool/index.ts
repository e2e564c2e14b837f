import { StorageError, type ObjectStorage } from '../store';
import { InvalidInputError } from '../contract/validation';

/*
 * The spool, where a batch keeps its results until they are in the sink: its layout (spool-layout.ts), the lanes'
 * journals and segments (lane-journal.ts), the sink assembled from them (sink-assembly.ts), and the spools of stopped
 * runs that a resume or a recovery reads (leftover-spools.ts).
 */

export { keptLines, spoolOf, spoolRoot, todoFile } from './spool-layout';
export { journaled, LaneJournal, logRecord, resealed, sealedLines, sealLane } from './lane-journal';
export { assembleSink, inOrderAhead, SegmentMissing } from './sink-assembly';
export { assembleLeftover, carryOkLines, leftoverSpools, removeLeftovers } from './leftover-spools';

/** Checks that an object can be created beside `uri` by creating and removing one (permission bits can lie: /proc). */
export async function probeWritable(storage: ObjectStorage, uri: string): Promise<void> {
  await storage.checkWritable(uri);
  const probe = `${uri}.probe-${process.pid}-${Date.now()}`;
  try {
    await storage.write(probe, '');
  } catch (error) {
    if (error instanceof StorageError)
      throw new InvalidInputError([
        { path: uri, message: `cannot be written (${error.message.slice(probe.length + 2)})` },
      ]);
    throw error;
  }
  await storage.remove(probe);
}
