import { readFileSync, statSync } from 'node:fs';
import { decodeLine } from '../spool/lines';
import { parseJsonText } from '../spool/task-source';
import { z } from 'zod';
import { agentTaskSchema, type AgentTask } from '../contract/agent-task';
import { fanOutOptionsSchema, type FanOutOptions } from '../contract/fan-out';
import type { DagNode, Synthesis } from '../contract/dag';
import {
  duplicateIdIssues,
  InvalidInputError,
  issuesFromZod,
  safeParse,
  validateDagInput,
  validateFanOutFanInInput,
  type InputIssue,
} from '../contract/validation';

/** A run's task file is read whole; larger lists belong in a batch, which streams its file. */
export const MAX_RUN_FILE_BYTES = 256_000_000;

/** Tasks read from a file, with any options the file carries. */
export interface TaskFile {
  tasks: AgentTask[];
  options?: FanOutOptions;
}

const jsonFileSchema = z.union([
  z.array(z.unknown()),
  z.strictObject({ tasks: z.array(z.unknown()), options: z.unknown().optional() }),
]);

/** What a run file asks for, by its shape. */
export type RunFile =
  | { kind: 'fanOut'; tasks: AgentTask[]; options?: FanOutOptions }
  | { kind: 'dag'; nodes: DagNode[]; options?: FanOutOptions }
  | { kind: 'fanOutFanIn'; tasks: AgentTask[]; synthesis?: Synthesis; options?: FanOutOptions };

function parseJsonValue(text: string, file: string): unknown {
  const { value, error } = parseJsonText(text);
  if (error !== undefined) throw new InvalidInputError([{ path: file, message: error }]);
  return value;
}

function prefixed(error: unknown, file: string): never {
  if (error instanceof InvalidInputError)
    throw new InvalidInputError(error.issues.map((issue) => ({ ...issue, path: `${file} ${issue.path}` })));
  throw error;
}

/**
 * Reads a run file and tells its shape: a DAG when tasks carry `dependsOn` (JSONL lines, or `{ "nodes": [...] }`), a
 * fan-out/fan-in when the file has `{ "tasks", "synthesis" }`, else a plain fan-out. Validated as that shape.
 */
export function readRunFile(file: string): RunFile {
  if (file.endsWith('.jsonl') || file.endsWith('.ndjson')) {
    const text = readText(file);
    if (!/"dependsOn"\s*:/.test(text)) return { kind: 'fanOut', tasks: parseJsonLines(text, file).tasks };
    const nodes = text
      .split('\n')
      .flatMap((raw, index) => (raw.trim() === '' ? [] : [{ raw, line: index + 1 }]))
      .map(({ raw, line }) => {
        const { value, error } = parseJsonText(raw);
        if (error !== undefined) throw new InvalidInputError([{ path: `${file} line ${line}`, message: error }]);
        return value;
      });
    try {
      return { kind: 'dag', nodes: validateDagInput({ nodes }).nodes };
    } catch (error) {
      prefixed(error, file);
    }
  }
  const value = parseJsonValue(readText(file), file);
  if (typeof value === 'object' && value !== null && 'nodes' in value) {
    try {
      const input = validateDagInput(value);
      return { kind: 'dag', nodes: input.nodes, options: input.options };
    } catch (error) {
      prefixed(error, file);
    }
  }
  if (typeof value === 'object' && value !== null && 'synthesis' in value) {
    try {
      const input = validateFanOutFanInInput(value);
      return { kind: 'fanOutFanIn', tasks: input.tasks, synthesis: input.synthesis, options: input.options };
    } catch (error) {
      prefixed(error, file);
    }
  }
  return { kind: 'fanOut', ...tasksFrom(value, file) };
}

/**
 * The file's text, decoded strictly: bytes that are not UTF-8 are refused with their line (never silently replaced and
 * sent to a model); a leading byte-order mark is dropped.
 */
function readText(file: string): string {
  let bytes: Buffer;
  try {
    const size = statSync(file).size;
    if (size > MAX_RUN_FILE_BYTES) {
      throw new InvalidInputError([
        {
          path: file,
          message: `tasks file is ${(size / 1e6).toFixed(1)} MB; the limit is ${(MAX_RUN_FILE_BYTES / 1e6).toFixed(1)} MB for a run (use \`fanout batch start\`, which streams files of any size)`,
        },
      ]);
    }
    bytes = readFileSync(file);
  } catch (error) {
    if (error instanceof InvalidInputError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw new InvalidInputError([
      {
        path: file,
        message:
          code === 'EISDIR'
            ? 'is a directory, not a task file'
            : `cannot be read (${code ?? (error as Error).message})`,
      },
    ]);
  }
  let start = 0;
  let line = 1;
  for (let index = bytes.indexOf(10); ; index = bytes.indexOf(10, start)) {
    const end = index === -1 ? bytes.length : index;
    if (decodeLine(bytes.subarray(start, end)) === undefined) {
      throw new InvalidInputError([
        { path: `${file} line ${line}`, message: 'is not valid UTF-8 (save the file as UTF-8)' },
      ]);
    }
    if (index === -1) break;
    start = index + 1;
    line += 1;
  }
  const text = bytes.toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function parseJsonLines(text: string, file: string): { tasks: AgentTask[]; lines: number[] } {
  const issues: InputIssue[] = [];
  const tasks: AgentTask[] = [];
  const lines: number[] = [];
  text.split('\n').forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === '') return;
    const { value, error } = parseJsonText(raw);
    if (error !== undefined) {
      issues.push({ path: `${file} line ${line}`, message: error });
      return;
    }
    const parsed = safeParse(agentTaskSchema, value);
    if (!parsed.success) {
      issues.push(
        ...issuesFromZod(parsed.error).map((issue) => ({
          ...issue,
          path: `${file} line ${line}${issue.path ? `: ${issue.path}` : ''}`,
        })),
      );
      return;
    }
    tasks.push(parsed.data);
    lines.push(line);
  });
  issues.push(
    ...duplicateIdIssues(
      tasks.map((task) => task.id),
      (index) => `${file} line ${lines[index]}`,
      ': ',
      (index) => `line ${lines[index]}`,
    ),
  );
  if (issues.length > 0) throw new InvalidInputError(issues);
  return { tasks, lines };
}

function tasksFrom(value: unknown, file: string): TaskFile {
  const shape = jsonFileSchema.safeParse(value);
  if (!shape.success) {
    throw new InvalidInputError([
      { path: file, message: 'must be an array of tasks or an object { "tasks": [...], "options": {...} }' },
    ]);
  }
  const rawTasks = Array.isArray(shape.data) ? shape.data : shape.data.tasks;
  const rawOptions = Array.isArray(shape.data) ? undefined : shape.data.options;
  const issues: InputIssue[] = [];
  const tasks: AgentTask[] = [];
  rawTasks.forEach((raw, index) => {
    const parsed = safeParse(agentTaskSchema, raw);
    if (parsed.success) tasks.push(parsed.data);
    else issues.push(...issuesFromZod(parsed.error, `${file} tasks[${index}]`));
  });
  let options: FanOutOptions | undefined;
  if (rawOptions !== undefined) {
    const parsed = safeParse(fanOutOptionsSchema, rawOptions);
    if (parsed.success) options = parsed.data;
    else issues.push(...issuesFromZod(parsed.error, `${file} options`));
  }
  if (issues.length === 0)
    issues.push(
      ...duplicateIdIssues(
        tasks.map((task) => task.id),
        (index) => `${file} tasks[${index}]`,
      ),
    );
  if (issues.length > 0) throw new InvalidInputError(issues);
  return { tasks, options };
}

/**
 * Reads and validates a task file: `.jsonl` (one task per line) or `.json` (an array of tasks, or
 * `{ tasks, options }`). Every problem is reported with its line or index before anything starts.
 */
export function readTaskFile(file: string): TaskFile {
  const text = readText(file);
  if (file.endsWith('.jsonl') || file.endsWith('.ndjson')) return { tasks: parseJsonLines(text, file).tasks };
  return tasksFrom(parseJsonValue(text, file), file);
}
