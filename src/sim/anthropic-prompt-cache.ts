import { createHash } from 'node:crypto';
import { countTokens } from './prompt-text';

/**
 * Anthropic's prompt cache as the simulator keeps it. A request's prefix is its blocks in Anthropic's order (tools,
 * system, then each message's content blocks); a block marked `cache_control` is a breakpoint. At most 4 breakpoints
 * (more is a 400). The request reads the longest prefix found in the cache that ends at a breakpoint or up to 20
 * blocks before one (Anthropic's look-back), and writes the prefix at every breakpoint after it that is at least the
 * model's minimum cacheable length, to live its `ttl` (5 minutes, or 1 hour); a read renews the entry it read. Entries
 * are keyed by API key, model and a hash chained over the prefix's blocks (their `cache_control` left out), so the same
 * blocks in the same order, byte for byte, are the same entry.
 */

/** Blocks before a breakpoint that Anthropic checks for an earlier cache entry. */
const LOOK_BACK_BLOCKS = 20;
/** Breakpoints a request may mark. */
export const MAX_BREAKPOINTS = 4;
const TTL_MS = { '5m': 5 * 60_000, '1h': 60 * 60_000 } as const;

type Ttl = keyof typeof TTL_MS;

/** What a request read from and wrote to the cache, in tokens, and the breakpoints it marked. */
export interface CacheUsage {
  breakpoints: number;
  /** Every input token of the request (read, written and the rest). */
  totalTokens: number;
  readTokens: number;
  write5mTokens: number;
  write1hTokens: number;
}

interface Block {
  tokens: number;
  /** The breakpoint's time to live, when the block is one. */
  ttl?: Ttl;
  canonical: string;
}

/** Anthropic's minimum cacheable prompt length by model (Haiku's is longer); the simulator's setting wins. */
export function minimumCacheableTokens(model: string, configured: number | undefined): number {
  if (configured !== undefined) return configured;
  return /haiku/.test(model) ? 2048 : 1024;
}

/** A block's tokens in the simulator's count: words of its text, or of its JSON with the punctuation as spaces. */
function tokensOf(block: Record<string, unknown>): number {
  if (block.type === 'text' && typeof block.text === 'string') return countTokens(block.text);
  return JSON.stringify(block)
    .split(/[\s{}[\]",:]+/)
    .filter(Boolean).length;
}

function blockOf(value: unknown): Block {
  const { cache_control: control, ...rest } = (typeof value === 'object' && value !== null ? value : {}) as Record<
    string,
    unknown
  >;
  const ttl =
    typeof control === 'object' && control !== null
      ? (control as { ttl?: unknown }).ttl === '1h'
        ? '1h'
        : '5m'
      : undefined;
  return { tokens: tokensOf(rest), ...(ttl ? { ttl } : {}), canonical: JSON.stringify(rest) };
}

/** The blocks of a Messages API request body, in prefix order. */
export function blocksOf(body: Record<string, unknown>): Block[] {
  const blocks: Block[] = [];
  for (const tool of Array.isArray(body.tools) ? body.tools : []) blocks.push(blockOf(tool));
  if (typeof body.system === 'string') blocks.push(blockOf({ type: 'text', text: body.system }));
  else if (Array.isArray(body.system)) for (const block of body.system) blocks.push(blockOf(block));
  for (const message of Array.isArray(body.messages)
    ? (body.messages as { role?: unknown; content?: unknown }[])
    : []) {
    const content =
      typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : (message.content ?? []);
    // The role is part of what a block means: the same text from the user and from the assistant is not one prefix.
    for (const block of Array.isArray(content) ? content : [])
      blocks.push({ ...blockOf(block), canonical: `${String(message.role)}:${blockOf(block).canonical}` });
  }
  return blocks;
}

export class AnthropicPromptCache {
  private readonly entries = new Map<string, { expiresAt: number; ttl: Ttl }>();

  /**
   * Reads and writes the cache for one request; throws a message for a request Anthropic refuses (more than 4
   * breakpoints). `scope` separates caches (API key and model), `minimumTokens` is the model's minimum.
   */
  use(scope: string, body: Record<string, unknown>, minimumTokens: number, now: number = Date.now()): CacheUsage {
    const blocks = blocksOf(body);
    const breakpoints = blocks.flatMap((block, index) => (block.ttl ? [index] : []));
    if (breakpoints.length > MAX_BREAKPOINTS)
      throw new Error(
        `A maximum of ${MAX_BREAKPOINTS} blocks with cache_control may be provided. Found ${breakpoints.length}.`,
      );
    const hashes: string[] = [];
    const ends: number[] = [];
    let hash = createHash('sha256').update(scope).digest('hex');
    let tokens = 0;
    for (const block of blocks) {
      hash = createHash('sha256').update(hash).update(block.canonical).digest('hex');
      tokens += block.tokens;
      hashes.push(hash);
      ends.push(tokens);
    }
    const live = (index: number) => {
      const entry = this.entries.get(hashes[index]);
      return entry !== undefined && entry.expiresAt > now ? entry : undefined;
    };
    let read = -1;
    for (const breakpoint of breakpoints)
      for (let index = breakpoint; index >= Math.max(0, breakpoint - LOOK_BACK_BLOCKS); index -= 1)
        if (index > read && live(index)) {
          read = index;
          break;
        }
    const usage: CacheUsage = {
      breakpoints: breakpoints.length,
      totalTokens: tokens,
      readTokens: read >= 0 ? ends[read] : 0,
      write5mTokens: 0,
      write1hTokens: 0,
    };
    const entry = read >= 0 ? live(read) : undefined;
    if (entry) entry.expiresAt = now + TTL_MS[entry.ttl];
    let written = usage.readTokens;
    for (const index of breakpoints) {
      const ttl = blocks[index].ttl as Ttl;
      if (index <= read || ends[index] < minimumTokens) continue;
      this.entries.set(hashes[index], { expiresAt: now + TTL_MS[ttl], ttl });
      if (ttl === '1h') usage.write1hTokens += ends[index] - written;
      else usage.write5mTokens += ends[index] - written;
      written = ends[index];
    }
    return usage;
  }

  clear(): void {
    this.entries.clear();
  }
}

/**
 * Anthropic's `usage` for an answer whose request read and wrote the cache as `cache` says: its `input_tokens` leave out
 * the tokens read from and written to the cache, which have fields of their own.
 */
export function anthropicUsageOf(cache: CacheUsage, outputTokens: number) {
  const written = cache.write5mTokens + cache.write1hTokens;
  return {
    input_tokens: cache.totalTokens - cache.readTokens - written,
    cache_creation_input_tokens: written,
    cache_read_input_tokens: cache.readTokens,
    cache_creation: {
      ephemeral_5m_input_tokens: cache.write5mTokens,
      ephemeral_1h_input_tokens: cache.write1hTokens,
    },
    output_tokens: outputTokens,
  };
}
