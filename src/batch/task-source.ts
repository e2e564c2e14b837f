import { open } from 'node:fs/promises';
import { agentTaskSchema, type AgentTask } from '../contract/agent-task';
import type { BatchEntry } from '../contract/batch';
import { InvalidInputError, issuesFromZod, safeParse, type InputIssue } from '../contract/validation';

const CHUNK_BYTES = 1 << 20;

/** One line of a file with its byte offset and length (newline excluded). */
export interface SourceLine {
  text: string;
  offset: number;
  length: number;
  /** 1-based line number, counted from `firstLine`. */
  line: number;
}

/**
 * Reads a file's lines from byte `start`, with the byte offset of each, in chunks (1 MiB by default; files far larger
 * than memory are fine). `firstLine` is the number of the line at `start`, for messages.
 */
export async function* linesFrom(path: string, start = 0, firstLine = 1, chunkBytes = CHUNK_BYTES): AsyncGenerator<SourceLine> {
  const handle = await open(path, 'r');
  try {
    let position = start;
    let carry = Buffer.alloc(0);
    let carryOffset = start;
    let line = firstLine;
    for (;;) {
      const chunk = Buffer.alloc(chunkBytes);
      const { bytesRead } = await handle.read(chunk, 0, chunkBytes, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      const buffer = Buffer.concat([carry, chunk.subarray(0, bytesRead)]);
      let lineStart = 0;
      for (let index = buffer.indexOf(10); index !== -1; index = buffer.indexOf(10, lineStart)) {
        const raw = buffer.subarray(lineStart, index);
        yield { text: raw.toString('utf8').replace(/\r$/, ''), offset: carryOffset + lineStart, length: raw.length, line };
        line += 1;
        lineStart = index + 1;
      }
      carryOffset += lineStart;
      carry = Buffer.from(buffer.subarray(lineStart));
    }
    if (carry.length > 0) yield { text: carry.toString('utf8').replace(/\r$/, ''), offset: carryOffset, length: carry.length, line };
  } finally {
    await handle.close();
  }
}

function parseLine(text: string, where: string): { task?: AgentTask; issues: InputIssue[] } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { issues: [{ path: where, message: `not valid JSON (${(error as Error).message})` }] };
  }
  const parsed = safeParse(agentTaskSchema, value);
  if (!parsed.success) return { issues: issuesFromZod(parsed.error).map((issue) => ({ ...issue, path: `${where}${issue.path ? `: ${issue.path}` : ''}` })) };
  return { task: parsed.data, issues: [] };
}

export interface SourceScan {
  /** Tasks in the file. */
  tasks: number;
  /** Tasks not in `skip`. */
  toRun: number;
}

/**
 * Validates every line of a JSONL task file (blank lines are allowed) and counts its tasks; a file of any size is
 * read in chunks. Throws InvalidInputError naming up to 20 problems by line.
 */
export async function scanTaskSource(path: string, options: { skip?: ReadonlySet<string>; onProgress?: () => void } = {}): Promise<SourceScan> {
  const issues: InputIssue[] = [];
  const firstSeen = new Map<string, number>();
  let tasks = 0;
  let toRun = 0;
  try {
    for await (const line of linesFrom(path)) {
      if (line.line % 10_000 === 0) options.onProgress?.();
      if (line.text.trim() === '') continue;
      const { task, issues: lineIssues } = parseLine(line.text, `${path} line ${line.line}`);
      if (!task) {
        issues.push(...lineIssues);
      } else {
        const first = firstSeen.get(task.id);
        if (first !== undefined) issues.push({ path: `${path} line ${line.line}: id`, message: `duplicate id "${task.id}" (first at line ${first})` });
        else firstSeen.set(task.id, line.line);
        tasks += 1;
        if (!options.skip?.has(task.id)) toRun += 1;
      }
      if (issues.length >= 20) break;
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'EACCES' || code === 'EISDIR') throw new InvalidInputError([{ path, message: `cannot be read (${code})` }]);
    throw error;
  }
  if (issues.length > 0) throw new InvalidInputError(issues);
  if (tasks === 0) throw new InvalidInputError([{ path, message: 'holds no tasks' }]);
  return { tasks, toRun };
}

/** Up to `limit` entries from byte `offset` on, skipping ids in `skip`; `nextOffset` is where the next page starts. */
export async function readEntries(
  path: string,
  offset: number,
  limit: number,
  skip?: ReadonlySet<string>,
): Promise<{ entries: BatchEntry[]; nextOffset: number; eof: boolean }> {
  const entries: BatchEntry[] = [];
  let nextOffset = offset;
  // A page is a few hundred short lines: small reads, not a megabyte of garbage per page.
  for await (const line of linesFrom(path, offset, 0, 64 * 1024)) {
    if (entries.length >= limit) return { entries, nextOffset, eof: false };
    nextOffset = line.offset + line.length + 1;
    if (line.text.trim() === '') continue;
    const { task, issues } = parseLine(line.text, `${path} at byte ${line.offset}`);
    if (!task) throw new InvalidInputError(issues);
    if (skip?.has(task.id)) continue;
    entries.push({ id: task.id, name: task.name ?? task.id, offset: line.offset, length: line.length, line: line.line });
  }
  return { entries, nextOffset, eof: true };
}

/** The task stored at an entry's place in the source. */
export async function readTaskAt(path: string, offset: number, length: number): Promise<AgentTask> {
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.alloc(length);
    await handle.read(buffer, 0, length, offset);
    const { task, issues } = parseLine(buffer.toString('utf8').replace(/\r$/, ''), `${path} at byte ${offset}`);
    if (!task) throw new InvalidInputError(issues);
    return task;
  } finally {
    await handle.close();
  }
}
