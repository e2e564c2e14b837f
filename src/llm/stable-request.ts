import { createHash } from 'node:crypto';

/**
 * Requests made byte-stable, so a provider's prompt cache matches their prefixes: the same messages and tools give the
 * same bytes at every agent step and on every worker, whatever order a tool registry or an MCP server listed the tools
 * in, or the order an object's keys were set in. Arrays keep their order (a conversation's, a schema's `required`);
 * objects get their keys sorted. Key order means nothing to a provider, so nothing is lost.
 */
export function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (typeof value !== 'object' || value === null) return value;
  const sorted: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const field = (value as Record<string, unknown>)[key];
    if (field !== undefined) sorted[key] = sortedKeys(field);
  }
  return sorted;
}

interface ToolLike {
  type?: string;
  function?: { name?: string };
}

/** Tools in name order, each with its keys sorted. */
export function stableTools<T extends ToolLike>(tools: readonly T[]): T[] {
  return [...tools]
    .sort((a, b) => (a.function?.name ?? '').localeCompare(b.function?.name ?? '', 'en'))
    .map((tool) => sortedKeys(tool) as T);
}

/** Messages with their keys sorted, in their order. */
export function stableMessages<T>(messages: readonly T[]): T[] {
  return messages.map((message) => sortedKeys(message) as T);
}

/**
 * OpenAI's `prompt_cache_key` for a request: a digest of its stable prefix (the tools and the leading system
 * messages), so requests that share that prefix are routed to the same cache. None when there is no such prefix: a
 * key shared by every bare prompt would only crowd one cache.
 */
export function promptCacheKeyOf(
  messages: readonly { role?: string; content?: unknown }[],
  tools: readonly ToolLike[] | undefined,
): string | undefined {
  const system: unknown[] = [];
  for (const message of messages) {
    if (message.role !== 'system' && message.role !== 'developer') break;
    system.push(message.content);
  }
  if (system.length === 0 && (tools === undefined || tools.length === 0)) return undefined;
  const prefix = JSON.stringify(sortedKeys({ system, tools: stableTools(tools ?? []) }));
  return `fanout-${createHash('sha256').update(prefix).digest('base64url').slice(0, 32)}`;
}
