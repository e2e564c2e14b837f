import { readFileSync } from 'node:fs';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { z } from 'zod';
import type { Environment } from '../config/environment';
import { DEFAULT_TOOL_TIMEOUT_MS, type Tool } from './define-tool';

/** One MCP server the worker's agents may use: a command (stdio) or a URL (Streamable HTTP). */
export const mcpServerSchema = z
  .strictObject({
    /** A label for logs and errors. */
    name: z.string().min(1),
    /** stdio: the command that starts the server, and its arguments, environment and directory. */
    command: z.string().min(1).optional(),
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().optional(),
    /** Streamable HTTP: the server's endpoint, and headers to send (e.g. authorization). */
    url: z.url().optional(),
    headers: z.record(z.string(), z.string()).optional(),
    /** Calls that need a person's approval: every tool of the server (true) or those named. Default none. */
    needsApproval: z.union([z.boolean(), z.array(z.string())]).optional(),
    /** How long an approval may wait before the call is denied, ms. Default 24 hours. */
    approvalTimeoutMs: z.number().int().min(1).optional(),
    /** Longest one tool call may take, ms. Default 300000. */
    timeoutMs: z.number().int().min(1).optional(),
  })
  .refine(
    (server) => (server.command === undefined) !== (server.url === undefined),
    'give either command (stdio) or url (Streamable HTTP)',
  );
export type McpServerConfig = z.input<typeof mcpServerSchema>;

/**
 * FANOUT_MCP_SERVERS: a JSON array of server configs, or the path of a file holding one. Undefined when unset.
 *
 * @example FANOUT_MCP_SERVERS='[{"name":"files","command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","/data"]}]'
 */
export function mcpServersFromEnvironment(environment: Environment = process.env): McpServerConfig[] | undefined {
  const value = environment.FANOUT_MCP_SERVERS?.trim();
  if (!value) return undefined;
  const text = value.startsWith('[') ? value : readFileSync(value, 'utf8');
  const parsed = z.array(mcpServerSchema).safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`FANOUT_MCP_SERVERS: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/**
 * An MCP server could not be reached: its connection failed, or was lost during a call (the server stopped, restarted,
 * or its process exited). Not the tool's answer: the activity that needed the server fails, and Temporal's retry
 * connects afresh.
 */
export class McpServerUnavailableError extends Error {
  /** The server's name, as configured. */
  readonly server: string;

  constructor(server: { name: string; url?: string; command?: string }, cause: unknown) {
    super(`MCP server ${labelOf(server)}: ${reason(cause)}`, { cause });
    this.name = 'McpServerUnavailableError';
    this.server = server.name;
  }
}

/**
 * An error's message and its cause's (undici says only "fetch failed", its cause says why). Read by shape: fetch's errors
 * are of Node's own realm, not of a sandbox's (a test runner's) `Error`.
 */
function reason(error: unknown): string {
  const messageOf = (value: unknown) =>
    typeof value === 'object' && value !== null && 'message' in value ? String(value.message) : undefined;
  const message = messageOf(error) ?? String(error);
  const cause = typeof error === 'object' && error !== null && 'cause' in error ? messageOf(error.cause) : undefined;
  return cause ? `${message} (${cause})` : message;
}

/** `"docs" (https://mcp.example.com/mcp)`: a server as errors name it. */
function labelOf(server: { name: string; url?: string; command?: string }): string {
  return `"${server.name}" (${server.url ?? server.command})`;
}

interface Connection {
  client: Client;
  tools: Tool[];
}

/** The text an MCP tool result holds: its text parts, other parts as JSON. */
function contentText(result: { content?: unknown; structuredContent?: unknown; toolResult?: unknown }): string {
  if (!('content' in result) && 'toolResult' in result) return JSON.stringify(result.toolResult);
  const parts = Array.isArray(result.content) ? (result.content as { type?: string; text?: string }[]) : [];
  if (parts.length === 0 && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return parts
    .map((part) => (part.type === 'text' && typeof part.text === 'string' ? part.text : JSON.stringify(part)))
    .join('\n');
}

/**
 * The tools of the worker's MCP servers. Each server is connected on first use (from an activity) and stays connected for
 * the worker's life; its tool list is read once. A server that cannot be reached, at first use or during a call, fails
 * the activity that needed it (McpServerUnavailableError), which Temporal retries: a connection lost in a call is dropped,
 * so the retry connects again.
 */
export class McpTools {
  private readonly servers: z.output<typeof mcpServerSchema>[];
  private readonly connections = new Map<string, Promise<Connection>>();

  constructor(configs: readonly McpServerConfig[]) {
    this.servers = configs.map((config, index) => {
      const parsed = mcpServerSchema.safeParse(config);
      if (!parsed.success) throw new TypeError(`mcpServers[${index}]: ${z.prettifyError(parsed.error)}`);
      return parsed.data;
    });
  }

  get size(): number {
    return this.servers.length;
  }

  private connect(server: z.output<typeof mcpServerSchema>): Promise<Connection> {
    let connection = this.connections.get(server.name);
    if (!connection) {
      connection = (async () => {
        // The MCP SDK is loaded at the first connection: a worker without MCP servers never loads it.
        const { Client: McpClient } =
          require('@modelcontextprotocol/sdk/client/index.js') as typeof import('@modelcontextprotocol/sdk/client/index.js');
        const { StdioClientTransport } =
          require('@modelcontextprotocol/sdk/client/stdio.js') as typeof import('@modelcontextprotocol/sdk/client/stdio.js');
        const { StreamableHTTPClientTransport } =
          require('@modelcontextprotocol/sdk/client/streamableHttp.js') as typeof import('@modelcontextprotocol/sdk/client/streamableHttp.js');
        const { ErrorCode, McpError } =
          require('@modelcontextprotocol/sdk/types.js') as typeof import('@modelcontextprotocol/sdk/types.js');
        const client: Client = new McpClient({ name: 'temporal-fanout', version: '0.2.0' });
        // A connection that failed a call is dropped: later calls connect again. It is closed (a stdio server's process
        // must not outlive it) once its other calls have ended: over HTTP one refused request (a proxy's 502) says
        // nothing of the others in flight, and closing under them would fail calls the server is running, which their
        // retries would run again.
        let inFlight = 0;
        let dropped = false;
        const closeWhenIdle = () => {
          if (dropped && inFlight === 0) void client.close().catch(() => undefined);
        };
        const forget = () => {
          if (this.connections.get(server.name) === connection) this.connections.delete(server.name);
          dropped = true;
          closeWhenIdle();
        };
        const transport =
          server.url !== undefined
            ? new StreamableHTTPClientTransport(
                new URL(server.url),
                server.headers ? { requestInit: { headers: server.headers } } : undefined,
              )
            : new StdioClientTransport({
                command: server.command as string,
                args: server.args ?? [],
                ...(server.env ? { env: { ...(process.env as Record<string, string>), ...server.env } } : {}),
                ...(server.cwd ? { cwd: server.cwd } : {}),
                stderr: 'inherit',
              });
        await client.connect(transport);
        const listed = await client.listTools();
        const approval = (tool: string) =>
          server.needsApproval === true || (Array.isArray(server.needsApproval) && server.needsApproval.includes(tool));
        const tools = listed.tools.map((definition): Tool => ({
          runner: 'activity',
          name: definition.name,
          description: definition.description ?? '',
          parameters: definition.inputSchema as Record<string, unknown>,
          ...(approval(definition.name) ? { approvalTimeoutMs: server.approvalTimeoutMs ?? 24 * 60 * 60_000 } : {}),
          timeoutMs: server.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
          mcpServer: server.name,
          async call(input, context) {
            let result;
            inFlight += 1;
            try {
              result = await client.callTool(
                { name: definition.name, arguments: (input ?? {}) as Record<string, unknown> },
                undefined,
                {
                  signal: context.signal,
                  timeout: server.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
                },
              );
            } catch (error) {
              // The server's own error (bad arguments, the tool's timeout) or an abort is the tool's; anything else is
              // the connection's: the server is gone or restarted, and this connection would fail every later call.
              if (context.signal.aborted || (error instanceof McpError && error.code !== ErrorCode.ConnectionClosed))
                throw error;
              forget();
              throw new McpServerUnavailableError(server, error);
            } finally {
              inFlight -= 1;
              closeWhenIdle();
            }
            const text = contentText(
              result as { content?: unknown; structuredContent?: unknown; toolResult?: unknown },
            );
            if (result.isError) throw new Error(text || `${definition.name} failed`);
            return text;
          },
        }));
        return { client, tools };
      })();
      // A failed connection is not kept: the next activity (Temporal's retry) tries again.
      connection.catch(() => this.connections.delete(server.name));
      this.connections.set(server.name, connection);
    }
    return connection;
  }

  /** The tools of one server, connecting to it if it is not yet connected. */
  private list(server: z.output<typeof mcpServerSchema>): Promise<Tool[]> {
    return this.connect(server).then(
      (connection) => connection.tools,
      (error: unknown) => {
        throw new McpServerUnavailableError(server, error);
      },
    );
  }

  /** Every tool of every server, connecting to those not yet connected. */
  async tools(): Promise<Tool[]> {
    return (await Promise.all(this.servers.map((server) => this.list(server)))).flat();
  }

  /**
   * The tools of these names on the servers that answer (on a name two servers share, the later server's). A server that
   * cannot be reached matters only when a wanted tool is on none that answer: it may be that server's, and the error
   * (McpServerUnavailableError) names it. A name on no server when all answer is simply not found.
   */
  async find(names: readonly string[]): Promise<Tool[]> {
    const lists = await Promise.allSettled(this.servers.map((server) => this.list(server)));
    const found = new Map<string, Tool>();
    for (const list of lists)
      if (list.status === 'fulfilled') for (const tool of list.value) found.set(tool.name, tool);
    const down = lists.find((list) => list.status === 'rejected');
    if (down && names.some((name) => !found.has(name))) throw down.reason;
    return names.flatMap((name) => found.get(name) ?? []);
  }

  /** Closes every connection (stdio servers are stopped). */
  async close(): Promise<void> {
    const connections = [...this.connections.values()];
    this.connections.clear();
    await Promise.all(
      connections.map((connection) => connection.then((open) => open.client.close()).catch(() => undefined)),
    );
  }
}
