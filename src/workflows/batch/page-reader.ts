import type { BatchActivities, BatchPage } from '../../contract/batch-activities';
import type { BatchEntry } from '../../contract/batch';

type PageActivities = Pick<BatchActivities, 'readBatchPage'>;

/**
 * The window's view of the task file: pages of entries (ids and byte offsets, never prompts) read ahead by an activity
 * while lanes run, so a lane never waits on a read in the steady state. Calls `onChange` when a page arrives or a read
 * fails for good.
 */
export class PageReader {
  private readonly buffer: BatchEntry[] = [];
  private nextOffset: number;
  private eof = false;
  private reading: Promise<void> | undefined;
  /** Pages read by this window, the first page included. */
  pagesRead = 0;
  /** A read that failed past its retries: the window stops with it. */
  failed: unknown;

  constructor(
    private readonly io: PageActivities,
    private readonly where: {
      file: string;
      fileBytes: number;
      cursor: number;
      pageSize: number;
      maxPages?: number;
      /** The stripe's end, when the window runs one. */
      end?: number;
    },
    firstPage: BatchPage | undefined,
    private readonly onChange: () => void,
    /** The first page is what a predecessor read and handed over: it does not count as a page this window read. */
    handedOver = false,
  ) {
    this.nextOffset = where.cursor;
    if (firstPage) this.accept(firstPage, handedOver ? 0 : 1);
  }

  private accept(page: BatchPage, pages = 1): void {
    this.buffer.push(...page.entries);
    this.nextOffset = page.nextOffset;
    this.eof = page.eof;
    this.pagesRead += pages;
  }

  /** True while this window may still read pages. */
  private mayRead(): boolean {
    return (
      !this.eof &&
      this.failed === undefined &&
      (this.where.maxPages === undefined || this.pagesRead < this.where.maxPages)
    );
  }

  /** Entries read and not taken. */
  buffered(): number {
    return this.buffer.length;
  }

  /** True while this window has entries to start, or pages it may still read. */
  hasMore(): boolean {
    return this.buffer.length > 0 || this.mayRead();
  }

  /** True when the file has entries this window will not start (it read its last page, not the file's). */
  leftForSuccessor(): boolean {
    return this.buffer.length > 0 || !this.eof;
  }

  /**
   * The next lane's entries, at most `count`, or one agent item (none while `agentRoom` is false): a lane ends before
   * the first agent, which runs on its own (a batch without agents takes `count` every time).
   */
  takeNext(count: number, agentRoom = true): BatchEntry[] {
    if (this.buffer[0]?.agent) return agentRoom ? this.buffer.splice(0, 1) : [];
    let end = 0;
    while (end < count && end < this.buffer.length && !this.buffer[end].agent) end += 1;
    return this.buffer.splice(0, end);
  }

  /** Starts reading the next page when fewer than `wanted` entries are buffered. */
  readAhead(wanted: number): void {
    if (this.reading !== undefined || !this.mayRead() || this.buffer.length >= wanted) return;
    this.reading = this.io
      .readBatchPage({
        file: this.where.file,
        fileBytes: this.where.fileBytes,
        offset: this.nextOffset,
        limit: this.where.pageSize,
        ...(this.where.end === undefined ? {} : { end: this.where.end }),
      })
      .then(
        (page) => this.accept(page),
        (error: unknown) => {
          this.failed = error;
        },
      )
      .finally(() => {
        this.reading = undefined;
        this.onChange();
      });
  }

  /** Waits for a read in flight, if any. */
  async settle(): Promise<void> {
    await this.reading;
  }

  /**
   * The entries read and not taken (at most `limit`), as a page a successor starts from: it need not read them again
   * before its first lanes.
   */
  handOff(limit: number): BatchPage {
    const entries = this.buffer.slice(0, limit);
    return entries.length < this.buffer.length
      ? { entries, nextOffset: this.buffer[entries.length].offset, eof: false }
      : { entries, nextOffset: this.nextOffset, eof: this.eof };
  }

  /** Byte offset of the first entry not taken. */
  cursor(): number {
    return this.buffer.length > 0 ? this.buffer[0].offset : this.nextOffset;
  }
}
