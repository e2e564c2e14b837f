import { createHash } from 'node:crypto';

/**
 * OpenAI's automatic prompt caching, simulated: a request's prompt is cached in prefixes of 1,024 tokens and then every
 * 128 more, per model and `prompt_cache_key`; a later request whose prompt starts with a cached prefix is served that
 * many tokens from cache (`cached_tokens`), the longest that matches. A prefix not used for `idleMs` is forgotten
 * (0: nothing is cached).
 * Tokens are the simulator's (whitespace-separated words), so a test can recount them.
 */
export const CACHE_MIN_TOKENS = 1024;
export const CACHE_INCREMENT_TOKENS = 128;

/** How long a cached prefix lives unused when neither the configuration nor FANOUT_SIM_PROMPT_CACHE_IDLE_MS says: 5 minutes. */
export const DEFAULT_CACHE_IDLE_MS = 300_000;

/** A prompt's words in the order the provider reads them: the tools offered, then every message. */
export function promptWords(body: { tools?: unknown; messages?: unknown }): string[] {
  const words: string[] = [];
  const add = (text: string) => {
    for (const word of text.split(/\s+/)) if (word !== '') words.push(word);
  };
  for (const tool of Array.isArray(body.tools) ? (body.tools as { function?: Record<string, unknown> }[]) : []) {
    const definition = tool.function ?? {};
    // The definition's JSON as words: its key order is part of the prefix, as its bytes are to a provider.
    add(`${String(definition.name ?? '')} ${String(definition.description ?? '')}`);
    add(JSON.stringify(definition.parameters ?? {}).replace(/[{}[\]",:]/g, ' '));
  }
  for (const message of Array.isArray(body.messages) ? (body.messages as MessageLike[]) : []) add(messageText(message));
  return words;
}

interface MessageLike {
  content?: unknown;
  tool_calls?: { function?: { name?: string; arguments?: string } }[];
}

/** A message's text as the simulator counts it (tool-calls.ts counts the same): its content and its tool calls. */
function messageText(message: MessageLike): string {
  const calls = (message.tool_calls ?? [])
    .map((call) => `${call.function?.name ?? ''} ${call.function?.arguments ?? ''}`)
    .join(' ');
  return `${typeof message.content === 'string' ? message.content : ''} ${calls}`;
}

/** The simulator's token count of a whole prompt (promptWords' length). */
export const promptTokenCount = (body: { tools?: unknown; messages?: unknown }): number => promptWords(body).length;

/**
 * A digest per cacheable prefix of the words: the first 1,024, then each 128 more; each digest chains the one before,
 * so the whole chain costs one pass over the prompt.
 */
export function prefixChain(words: readonly string[]): string[] {
  const chain: string[] = [];
  let digest = '';
  for (let end = CACHE_MIN_TOKENS; end <= words.length; end += CACHE_INCREMENT_TOKENS) {
    const start = end === CACHE_MIN_TOKENS ? 0 : end - CACHE_INCREMENT_TOKENS;
    digest = createHash('sha256')
      .update(digest)
      .update('\u0000')
      .update(words.slice(start, end).join(' '))
      .digest('hex');
    chain.push(digest);
  }
  return chain;
}

/** Cached tokens for the longest cached prefix at position `index` of a chain. */
const tokensAt = (index: number) => CACHE_MIN_TOKENS + index * CACHE_INCREMENT_TOKENS;

/** The simulated cache of one provider (or of one provider batch): prefixes by model and prompt_cache_key. */
export class SimulatedPromptCache {
  /** Last use (ms) of each prefix digest, by scope (model and key). */
  private readonly scopes = new Map<string, Map<string, number>>();
  private served = 0;

  constructor(private readonly idleMs: () => number) {}

  /**
   * Serves a prompt at `now` (ms): the tokens read from cache (0, or 1,024 + 128k), then its prefixes are cached
   * (or kept alive) from `now`.
   */
  serve(model: string, key: string | undefined, chain: readonly string[], now: number): number {
    const scopeName = `${model}\u0000${key ?? ''}`;
    let scope = this.scopes.get(scopeName);
    if (!scope) {
      scope = new Map();
      this.scopes.set(scopeName, scope);
    }
    const idleMs = this.idleMs();
    let hit = -1;
    for (const [index, digest] of chain.entries()) {
      const usedAt = scope.get(digest);
      if (usedAt === undefined || now - usedAt >= idleMs) break;
      hit = index;
    }
    for (const digest of chain) scope.set(digest, now);
    if (++this.served % 1000 === 0) this.forgetIdle(now, idleMs);
    return hit < 0 ? 0 : tokensAt(hit);
  }

  clear(): void {
    this.scopes.clear();
  }

  private forgetIdle(now: number, idleMs: number): void {
    for (const scope of this.scopes.values())
      for (const [digest, usedAt] of scope) if (now - usedAt >= idleMs) scope.delete(digest);
  }
}
