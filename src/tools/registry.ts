import type { Tool } from './define-tool';
import { McpTools, type McpServerConfig } from './mcp';
import { spawnAgentsTool } from './spawn-agents';
import type { WorkflowTool } from './workflow-tool';

/** A tool of the registry, by where it runs (`runner`): in the `toolCall` activity, or in the agent workflow. */
export type RegisteredTool = Tool | WorkflowTool;

/** The tools every worker has (run by the agent workflow). */
const BUILT_IN_TOOLS: readonly WorkflowTool[] = [spawnAgentsTool];

/**
 * The tools a worker offers its agents: the built-in `spawn_agents`, functions registered with `defineTool` and the
 * tools of its MCP servers. A registered function wins over an MCP tool of the same name.
 */
export class ToolRegistry {
  private readonly local = new Map<string, RegisteredTool>(BUILT_IN_TOOLS.map((tool) => [tool.name, tool]));
  readonly mcp: McpTools | undefined;

  constructor(tools: readonly Tool[] = [], mcpServers: readonly McpServerConfig[] = []) {
    for (const tool of tools) {
      if (this.local.get(tool.name)?.runner === 'workflow') throw new TypeError(`"${tool.name}" is a built-in tool`);
      if (this.local.has(tool.name)) throw new TypeError(`two tools are named "${tool.name}"`);
      this.local.set(tool.name, tool);
    }
    this.mcp = mcpServers.length > 0 ? new McpTools(mcpServers) : undefined;
  }

  /**
   * The tools of these names, and the names that are neither registered nor on an MCP server. An MCP server that cannot
   * be reached fails this (McpServerUnavailableError) only when a name is found nowhere else.
   */
  async resolve(names: readonly string[]): Promise<{ tools: RegisteredTool[]; unknown: string[] }> {
    const wanted = names.filter((name) => !this.local.has(name));
    const remote =
      wanted.length > 0 && this.mcp
        ? new Map((await this.mcp.find(wanted)).map((tool) => [tool.name, tool]))
        : new Map<string, Tool>();
    const tools: RegisteredTool[] = [];
    const unknown: string[] = [];
    for (const name of names) {
      const tool = this.local.get(name) ?? remote.get(name);
      if (tool) tools.push(tool);
      else unknown.push(name);
    }
    return { tools, unknown };
  }

  /** Names of every tool offered, the built-in ones first (connecting to the MCP servers). */
  async names(): Promise<string[]> {
    return [...this.local.keys(), ...(this.mcp ? (await this.mcp.tools()).map((tool) => tool.name) : [])];
  }

  close(): Promise<void> {
    return this.mcp?.close() ?? Promise.resolve();
  }
}
