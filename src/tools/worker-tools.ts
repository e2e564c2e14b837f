import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Worker } from '@temporalio/worker';
import type { Environment } from '../config/environment';
import { toolsOfModule, type Tool } from './define-tool';
import { mcpServersFromEnvironment, type McpServerConfig } from './mcp';
import { ToolRegistry } from './registry';

/**
 * The worker's tool registry from its options, else the environment (FANOUT_TOOLS: modules of `defineTool` exports,
 * comma-separated; FANOUT_MCP_SERVERS: MCP servers).
 */
export function toolRegistryFor(
  options: { tools?: readonly Tool[]; mcpServers?: readonly McpServerConfig[] },
  environment: Environment = process.env,
): ToolRegistry {
  const modules =
    environment.FANOUT_TOOLS?.split(',')
      .map((entry) => entry.trim())
      .filter(Boolean) ?? [];
  const tools = options.tools ?? modules.flatMap((module) => loadToolModule(module));
  return new ToolRegistry(tools, options.mcpServers ?? mcpServersFromEnvironment(environment) ?? []);
}

/** Files loaded through tsx (TypeScript, as the shipped examples are written); anything else is required as it is. */
const TYPESCRIPT_FILE = /\.(ts|cts|mts|tsx)$/;

/** Loads a TypeScript file through tsx's CommonJS API, loaded only when a worker is given such a file. */
function requireTypeScript(file: string): unknown {
  // Required by name: its types need the node16 module resolution this package does not use.
  const tsx = require('tsx/cjs/api') as { require: (id: string, fromFile: string) => unknown };
  return tsx.require(file, __filename);
}

/**
 * The tools a module exports: a file (a path, relative to the working directory with or without `./`, or absolute;
 * JavaScript, or TypeScript compiled on load by tsx) or an installed package's name.
 */
export function loadToolModule(module: string): Tool[] {
  const isFile = module.startsWith('.') || path.isAbsolute(module) || existsSync(module);
  const resolved = isFile ? path.resolve(module) : module;
  let exported: Record<string, unknown>;
  try {
    exported = (TYPESCRIPT_FILE.test(resolved) ? requireTypeScript(resolved) : require(resolved)) as Record<
      string,
      unknown
    >;
  } catch (error) {
    throw new Error(`tools module ${module}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return toolsOfModule(exported, `tools module ${module}`);
}

/**
 * Closes the registry's MCP connections (stopping stdio servers) when the worker has stopped: its `run()` (and so
 * `runUntil()`) settles only after that, so no stdio server's process outlives the worker that started it (whoever ran
 * the worker may go on, or exit, at once).
 */
export function closeToolsWhenStopped(worker: Worker, registry: ToolRegistry): void {
  if (!registry.mcp) return;
  const run = worker.run.bind(worker);
  worker.run = () => run().finally(() => registry.close());
}
