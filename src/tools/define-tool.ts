import { z } from 'zod';

/** What a tool's `run` gets besides its input. */
export interface ToolContext {
  /** Aborted when the call is cancelled (the agent was cancelled, failed or stopped) or times out: pass it to I/O. */
  signal: AbortSignal;
  /** The agent's task id and the model's id for this call. */
  taskId: string;
  callId: string;
  /** The agent's workflow id. */
  workflowId: string;
}

export interface ToolDefinition<S extends z.ZodType> {
  /** What the model calls it: letters, digits, _ and -, at most 64 characters. */
  name: string;
  /** What the model reads to decide when to call it. */
  description: string;
  /** The input's schema; the model sees it as JSON schema, and input that fails it goes back to the model as the error. */
  input: S;
  /** Runs the tool. A string result is sent as it is, anything else as JSON. A throw is sent to the model as the result. */
  run(input: z.output<S>, context: ToolContext): unknown;
  /**
   * A person must approve each call (`fanout approve <run> <call>`) before it runs; unanswered calls are denied after
   * `timeoutMs` (default 24 hours). Default false.
   */
  needsApproval?: boolean | { timeoutMs: number };
  /** Longest one call may run, ms; it is then aborted and reported to the model as failed. Default 300000. */
  timeoutMs?: number;
  /**
   * The tool's result depends on its input alone (no side effects, no clock): under a run's answer cache its results
   * are stored and a call with the same input is answered from the cache without running it (README, "Answer cache").
   * A failed call is never stored. Default false: the tool always runs.
   */
  cache?: boolean;
}

/**
 * A tool the worker can run, in the `toolCall` activity: its definition with the input schema turned into JSON schema.
 * (The built-in `spawn_agents` is run by the agent workflow instead: a WorkflowTool.)
 */
export interface Tool {
  readonly runner: 'activity';
  readonly name: string;
  readonly description: string;
  /** JSON schema of the input, as the provider wants it in `tools[].function.parameters`. */
  readonly parameters: Record<string, unknown>;
  readonly approvalTimeoutMs?: number;
  readonly timeoutMs: number;
  /** The MCP server the tool is on (its configured name); none for a tool defined on the worker. */
  readonly mcpServer?: string;
  /** Its results may be answered from the answer cache (`defineTool`'s `cache`). */
  readonly cacheable?: boolean;
  /** Validates the input and runs the tool; resolves to the text the model reads. Throws ToolInputError on bad input. */
  call(input: unknown, context: ToolContext): Promise<string>;
}

export const DEFAULT_TOOL_TIMEOUT_MS = 300_000;
const DEFAULT_APPROVAL_TIMEOUT_MS = 24 * 60 * 60_000;
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** The model's input did not match the tool's schema; the message says how, for the model to fix. */
export class ToolInputError extends Error {
  override readonly name = 'ToolInputError';
}

/** A tool's result as the text the model reads. */
export function resultText(value: unknown): string {
  if (typeof value === 'string') return value;
  return JSON.stringify(value ?? null);
}

/**
 * Defines a tool for agents: registered on the worker (`createFanoutWorker({ tools })`, `fanout worker --tools <module>`),
 * named by tasks in `tools`.
 *
 * @example
 * export const search = defineTool({
 *   name: 'search',
 *   description: 'Searches the docs',
 *   input: z.object({ q: z.string() }),
 *   run: async ({ q }, { signal }) => (await fetch(`https://example.com/?q=${encodeURIComponent(q)}`, { signal })).text(),
 * });
 */
export function defineTool<S extends z.ZodType>(definition: ToolDefinition<S>): Tool {
  if (!TOOL_NAME.test(definition.name))
    throw new TypeError(`defineTool: name must match ${TOOL_NAME}, got "${definition.name}"`);
  if (definition.timeoutMs !== undefined && !(definition.timeoutMs > 0))
    throw new TypeError(`defineTool ${definition.name}: timeoutMs must be positive, got ${definition.timeoutMs}`);
  const approval = definition.needsApproval;
  const approvalTimeoutMs =
    approval === undefined || approval === false
      ? undefined
      : approval === true
        ? DEFAULT_APPROVAL_TIMEOUT_MS
        : approval.timeoutMs;
  const { $schema: _schema, ...parameters } = z.toJSONSchema(definition.input, { io: 'input' }) as Record<
    string,
    unknown
  >;
  return {
    runner: 'activity',
    name: definition.name,
    description: definition.description,
    parameters,
    ...(approvalTimeoutMs === undefined ? {} : { approvalTimeoutMs }),
    timeoutMs: definition.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
    ...(definition.cache ? { cacheable: true } : {}),
    async call(input, context) {
      const parsed = definition.input.safeParse(input);
      if (!parsed.success)
        throw new ToolInputError(`invalid input for ${definition.name}: ${z.prettifyError(parsed.error)}`);
      return resultText(await definition.run(parsed.data, context));
    },
  };
}

/** True for what `defineTool` returns (a module's exports are scanned for these). */
export function isTool(value: unknown): value is Tool {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Tool).name === 'string' &&
    typeof (value as Tool).call === 'function' &&
    typeof (value as Tool).parameters === 'object'
  );
}

/**
 * The tools a module exports (`fanout worker --tools <module>`): every export made by `defineTool`, and the items of an
 * exported array of them (`export const tools = [...]`). Throws when it has none.
 */
export function toolsOfModule(exported: Record<string, unknown>, where: string): Tool[] {
  const tools: Tool[] = [];
  for (const value of Object.values(exported)) {
    if (isTool(value)) tools.push(value);
    else if (Array.isArray(value)) tools.push(...value.filter(isTool));
  }
  const unique = [...new Map(tools.map((tool) => [tool.name, tool])).values()];
  if (unique.length === 0) throw new Error(`${where} exports no tool made by defineTool`);
  return unique;
}
