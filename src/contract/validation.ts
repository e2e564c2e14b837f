import type { z } from 'zod';
import { batchInputSchema, type BatchInput } from './batch';
import { dagInputSchema, fanOutFanInInputSchema, type DagInput, type FanOutFanInInput } from './dag';
import { findCycle, unknownDependencyIssues } from './graph';
import { fanOutInputSchema, type FanOutInput } from './fan-out';
import { FailureType } from './failure-types';
import type { InputIssue } from './input-issue';

export type { InputIssue } from './input-issue';

/** Input that can never succeed. `code` is the failure type the workflows use for it. */
export class InvalidInputError extends Error {
  readonly code = FailureType.InvalidInput;
  constructor(readonly issues: readonly InputIssue[]) {
    super(formatIssues(issues));
    this.name = 'InvalidInputError';
  }
}

export function formatIssues(issues: readonly InputIssue[]): string {
  const shown = issues.slice(0, 10).map((issue) => (issue.path ? `${issue.path}: ${issue.message}` : issue.message));
  const more = issues.length > 10 ? `; and ${issues.length - 10} more` : '';
  return `invalid input: ${shown.join('; ')}${more}`;
}

export function formatPath(path: readonly PropertyKey[], prefix = ''): string {
  let text = prefix;
  for (const key of path) {
    if (typeof key === 'number') text += `[${key}]`;
    else text += text === '' ? String(key) : `.${String(key)}`;
  }
  return text;
}

/** Plainer messages than zod's defaults for the commonest mistakes. */
const errorMessages: z.core.$ZodErrorMap = (issue) => {
  if (issue.code === 'invalid_type' && issue.input === undefined) return 'is required';
  if (issue.code === 'unrecognized_keys')
    return `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((key) => `"${key}"`).join(', ')}`;
  return undefined;
};

/** Parses with a schema, using the messages above. */
export function safeParse<S extends z.ZodType>(schema: S, input: unknown): z.ZodSafeParseResult<z.output<S>> {
  return schema.safeParse(input, { error: errorMessages });
}

/** Turns a zod error into issues, each naming its field. */
export function issuesFromZod(error: z.ZodError, prefix = ''): InputIssue[] {
  return error.issues.map((issue) => ({ path: formatPath(issue.path, prefix), message: issue.message }));
}

/** Issues for every task id that appears more than once, each naming both places. */
export function duplicateIdIssues(
  ids: readonly string[],
  describe: (index: number) => string,
  separator = '.',
  describeFirst: (index: number) => string = describe,
): InputIssue[] {
  const firstSeen = new Map<string, number>();
  const issues: InputIssue[] = [];
  ids.forEach((id, index) => {
    const first = firstSeen.get(id);
    if (first === undefined) firstSeen.set(id, index);
    else
      issues.push({
        path: `${describe(index)}${separator}id`,
        message: `duplicate id "${id}" (first at ${describeFirst(first)})`,
      });
  });
  return issues;
}

/** Parses `input` with `schema`, or throws InvalidInputError naming every offending field. */
function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const parsed = safeParse(schema, input);
  if (!parsed.success) throw new InvalidInputError(issuesFromZod(parsed.error));
  return parsed.data;
}

/** Issues for every id that appears more than once in `field` (`tasks` or `nodes`), each naming both places. */
function repeatedIdIssues(field: 'tasks' | 'nodes', entries: readonly { id: string }[]): InputIssue[] {
  return duplicateIdIssues(
    entries.map((entry) => entry.id),
    (index) => `${field}[${index}]`,
  );
}

/**
 * Validates a fan-out input and returns it parsed. The client, the CLI and the workflow itself all run this,
 * so a run started from any Temporal client is refused the same way.
 *
 * @throws InvalidInputError naming every offending field.
 */
export function validateFanOutInput(input: unknown): FanOutInput {
  const parsed = parseOrThrow(fanOutInputSchema, input);
  const duplicates = repeatedIdIssues('tasks', parsed.tasks);
  if (duplicates.length > 0) throw new InvalidInputError(duplicates);
  return parsed;
}

/**
 * Validates a batch input (the task file itself is validated by the client, and again by the batch's first
 * activity, line by line).
 *
 * @throws InvalidInputError naming every offending field.
 */
export function validateBatchInput(input: unknown): BatchInput {
  return parseOrThrow(batchInputSchema, input);
}

/**
 * Validates a DAG: fields, duplicate ids, unknown dependencies, and cycles (the error names the cycle's path).
 *
 * @throws InvalidInputError naming every offending field.
 */
export function validateDagInput(input: unknown): DagInput {
  const parsed = parseOrThrow(dagInputSchema, input);
  const nodes = parsed.nodes;
  const issues = [...repeatedIdIssues('nodes', nodes), ...unknownDependencyIssues(nodes)];
  if (issues.length > 0) throw new InvalidInputError(issues);
  const cycle = findCycle(nodes);
  if (cycle) throw new InvalidInputError([{ path: 'nodes', message: `dependency cycle: ${cycle.join(' -> ')}` }]);
  return parsed;
}

/** Validates a fan-out/fan-in input. */
export function validateFanOutFanInInput(input: unknown): FanOutFanInInput {
  const parsed = parseOrThrow(fanOutFanInInputSchema, input);
  const issues = repeatedIdIssues('tasks', parsed.tasks);
  const synthesisId = parsed.synthesis?.id ?? 'synthesis';
  const clash = parsed.tasks.findIndex((task) => task.id === synthesisId);
  if (clash !== -1)
    issues.push({
      path: `tasks[${clash}].id`,
      message: `"${synthesisId}" is the synthesis agent's id; rename the task or set synthesis.id`,
    });
  if (issues.length > 0) throw new InvalidInputError(issues);
  return parsed;
}
