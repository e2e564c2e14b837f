import { agentTaskSchema, type AgentTask } from '../contract/agent-task';
import { runsAsAgent } from '../contract/agent-task-rules';
import type { BatchEntry } from '../contract/batch';
import { InvalidInputError, issuesFromZod, safeParse, type InputIssue } from '../contract/validation';
import { StorageError, type ObjectStorage } from '../store';
import { linesOf } from './lines';
import type { StripeMarks } from './stripes';

export { linesOf } from './lines';

/** JSON nested deeper than this is refused: nobody writes tasks that deep, and recursion on it overflows the stack. */
const MAX_JSON_DEPTH = 64;

/**
 * Where JSON text first nests deeper than MAX_JSON_DEPTH, as a field path (`messages[0].content...`), or undefined when it
 * does not. A scan of the text, not a parse: recursion on such input is what overflows the stack.
 */
function tooDeep(text: string): string | undefined {
  const path: (string | number)[] = [];
  let inString = false;
  let stringStart = 0;
  let lastString: string | undefined;
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index];
    if (inString) {
      if (char === '\\') index += 1;
      else if (char === '"') {
        inString = false;
        lastString = text.slice(stringStart, index);
      }
      continue;
    }
    if (char === '"') {
      inString = true;
      stringStart = index + 1;
    } else if (char === ':' && typeof path[path.length - 1] === 'string') path[path.length - 1] = lastString ?? '';
    else if (char === ',' && typeof path[path.length - 1] === 'number')
      path[path.length - 1] = (path[path.length - 1] as number) + 1;
    else if (char === '{' || char === '[') {
      path.push(char === '[' ? 0 : '');
      if (path.length > MAX_JSON_DEPTH) {
        return path
          .slice(0, 6)
          .map((part, at) => (typeof part === 'number' ? `[${part}]` : `${at === 0 ? '' : '.'}${part}`))
          .join('')
          .concat(path.length > 6 ? '...' : '');
      }
    } else if (char === '}' || char === ']') path.pop();
  }
  return undefined;
}

/** Parses JSON text, refusing nesting deeper than a task could need (a stack overflow is not an error message). */
export function parseJsonText(text: string): { value?: unknown; error?: string } {
  const deep = tooDeep(text);
  if (deep !== undefined)
    return { error: `${deep === '' ? 'the task' : deep} is nested deeper than ${MAX_JSON_DEPTH} levels` };
  try {
    return { value: JSON.parse(text) };
  } catch (error) {
    return { error: `not valid JSON (${(error as Error).message})` };
  }
}

export function parseTaskLine(text: string | undefined, where: string): { task?: AgentTask; issues: InputIssue[] } {
  if (text === undefined) return { issues: [{ path: where, message: 'is not valid UTF-8 (save the file as UTF-8)' }] };
  const { value, error } = parseJsonText(text);
  if (error !== undefined) return { issues: [{ path: where, message: error }] };
  const parsed = safeParse(agentTaskSchema, value);
  if (!parsed.success)
    return {
      issues: issuesFromZod(parsed.error).map((issue) => ({
        ...issue,
        path: `${where}${issue.path ? `: ${issue.path}` : ''}`,
      })),
    };
  return { task: parsed.data, issues: [] };
}

function unreadable(uri: string, error: unknown): never {
  if (error instanceof StorageError && error.code !== 'Unavailable') {
    throw new InvalidInputError([
      {
        path: uri,
        message:
          error.code === 'NotFound'
            ? 'cannot be read (it does not exist)'
            : `cannot be read (${error.message.slice(uri.length + 2)})`,
      },
    ]);
  }
  throw error;
}

export interface SourceScan {
  /** Tasks in the file. */
  tasks: number;
  /** Tasks not in `skip`. */
  toRun: number;
  /** The model the first task to run names, if it names one. */
  firstModel?: string;
  /** The line of the first agent (a task with tools or an output schema), if there is one. */
  firstAgentLine?: number;
}

/**
 * Validates every line of a JSONL task file (blank lines are allowed) and counts its tasks; a file of any size is
 * streamed. Throws InvalidInputError naming up to 20 problems by line.
 */
export async function scanTaskSource(
  storage: ObjectStorage,
  uri: string,
  options: { skip?: ReadonlySet<string>; onProgress?: () => void; marks?: StripeMarks } = {},
): Promise<SourceScan> {
  const issues: InputIssue[] = [];
  const firstSeen = new Map<string, number>();
  let tasks = 0;
  let toRun = 0;
  let firstModel: string | undefined;
  let firstAgentLine: number | undefined;
  if (await storage.isDirectory(uri))
    throw new InvalidInputError([{ path: uri, message: 'is a directory, not a task file' }]);
  try {
    for await (const line of linesOf(storage, uri)) {
      if (line.line % 10_000 === 0) options.onProgress?.();
      if (line.text !== undefined && line.text.trim() === '') continue;
      const { task, issues: lineIssues } = parseTaskLine(line.text, `${uri} line ${line.line}`);
      if (!task) {
        issues.push(...lineIssues);
      } else {
        if (firstAgentLine === undefined && runsAsAgent(task)) firstAgentLine = line.line;
        const first = firstSeen.get(task.id);
        if (first !== undefined)
          issues.push({
            path: `${uri} line ${line.line}: id`,
            message: `duplicate id "${task.id}" (first at line ${first})`,
          });
        else firstSeen.set(task.id, line.line);
        tasks += 1;
        if (!options.skip?.has(task.id)) {
          if (toRun === 0) firstModel = task.model;
          toRun += 1;
          options.marks?.add(line.offset);
        }
      }
      if (issues.length >= 20) break;
    }
  } catch (error) {
    unreadable(uri, error);
  }
  if (issues.length > 0) throw new InvalidInputError(issues);
  if (tasks === 0) throw new InvalidInputError([{ path: uri, message: 'holds no tasks' }]);
  return {
    tasks,
    toRun,
    ...(firstModel === undefined ? {} : { firstModel }),
    ...(firstAgentLine === undefined ? {} : { firstAgentLine }),
  };
}

/**
 * Up to `limit` entries from byte `offset` on, and none past byte `end` (the size the batch scanned: lines appended later
 * are not the batch's); `nextOffset` is where the next page starts.
 */
export async function readEntries(
  storage: ObjectStorage,
  uri: string,
  offset: number,
  limit: number,
  end = Number.POSITIVE_INFINITY,
): Promise<{ entries: BatchEntry[]; nextOffset: number; eof: boolean }> {
  const entries: BatchEntry[] = [];
  let nextOffset = offset;
  try {
    for await (const line of linesOf(storage, uri, offset, 0)) {
      if (line.offset >= end) break;
      if (entries.length >= limit) return { entries, nextOffset, eof: false };
      nextOffset = line.offset + line.length + 1;
      if (line.text !== undefined && line.text.trim() === '') continue;
      const { task, issues } = parseTaskLine(line.text, `${uri} at byte ${line.offset}`);
      if (!task) throw new InvalidInputError(issues);
      entries.push({
        id: task.id,
        offset: line.offset,
        length: line.length,
        ...(runsAsAgent(task) ? { agent: true } : {}),
      });
    }
  } catch (error) {
    if (error instanceof InvalidInputError) throw error;
    unreadable(uri, error);
  }
  return { entries, nextOffset, eof: true };
}

/** Copies the task lines of `source` whose ids are not in `skip` to `target`, streamed (a resume's tasks still to run). */
export async function copyTasks(
  storage: ObjectStorage,
  source: string,
  target: string,
  skip: ReadonlySet<string>,
): Promise<number> {
  return copyTasksWhere(storage, source, target, (id) => !skip.has(id));
}

/** Copies the task lines of `source` whose ids `keep` takes to `target`, streamed; returns how many. */
export async function copyTasksWhere(
  storage: ObjectStorage,
  source: string,
  target: string,
  keep: (id: string) => boolean,
): Promise<number> {
  let copied = 0;
  async function* kept(): AsyncGenerator<string> {
    for await (const line of linesOf(storage, source)) {
      if (line.text === undefined || line.text.trim() === '') continue;
      const { task } = parseTaskLine(line.text, `${source} line ${line.line}`);
      if (task && keep(task.id)) {
        copied += 1;
        yield `${line.text}\n`;
      }
    }
  }
  try {
    await storage.writeStream(target, kept());
  } catch (error) {
    unreadable(source, error);
  }
  return copied;
}

/** The source no longer holds, at an entry's place, the task the batch read there: it was changed under the batch. */
export class SourceChanged extends Error {}
