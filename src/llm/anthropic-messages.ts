import type Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type {
  ChatCompletion,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
} from 'openai/resources/chat/completions';
import type { RequestOptions } from 'openai/internal/request-options';
import type { PromptCache } from '../contract/agent-task';

/** What the sync path needs from an Anthropic client: the Messages API. */
export type MessagesClient = Pick<Anthropic, 'messages'>;

/**
 * The completion budget sent when a task sets no `maxTokens`: Anthropic requires one, OpenAI does not. Large enough
 * not to cut an ordinary answer short; a task that wants more (or less) sets `maxTokens`.
 */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096;

/** The cache-write counts an Anthropic answer adds to a chat completion's usage (OpenAI's has no such fields). */
export interface CacheWriteUsage {
  cache_write_5m_tokens?: number;
  cache_write_1h_tokens?: number;
}

type Block = Anthropic.Messages.ContentBlockParam;
type CacheControl = Anthropic.Messages.CacheControlEphemeral;

/** The text of a chat message's content (a string, or text parts). */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content
      .map((part: unknown) =>
        typeof part === 'object' && part !== null && 'text' in part && typeof part.text === 'string' ? part.text : '',
      )
      .join('');
  return '';
}

/** A tool call's arguments as the object Anthropic's `tool_use.input` must be; arguments that are not one go as `{}`. */
function inputOf(argumentsText: string): Record<string, unknown> {
  try {
    const value = JSON.parse(argumentsText) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

/**
 * The transcript (one stored format, the Chat Completions one) as Anthropic's `system` and `messages`: system messages
 * become system blocks; an assistant's tool calls `tool_use` blocks after its text; tool messages `tool_result` blocks
 * of the user turn that follows; consecutive messages of one role are joined into one turn, as Anthropic wants turns to
 * alternate (a step's tool results and the note after them are one user turn). Every object is built with its keys in
 * one order, so the same transcript is the same bytes at every step and on every worker.
 */
export function messagesOf(messages: readonly ChatCompletionMessageParam[]): {
  system: Anthropic.Messages.TextBlockParam[];
  turns: { role: 'user' | 'assistant'; content: Block[] }[];
} {
  const system: Anthropic.Messages.TextBlockParam[] = [];
  const turns: { role: 'user' | 'assistant'; content: Block[] }[] = [];
  const add = (role: 'user' | 'assistant', blocks: Block[]) => {
    if (blocks.length === 0) return;
    const last = turns.at(-1);
    if (last?.role === role) last.content.push(...blocks);
    else turns.push({ role, content: blocks });
  };
  for (const message of messages) {
    if (message.role === 'system' || message.role === 'developer') {
      const text = textOf(message.content);
      if (text !== '') system.push({ type: 'text', text });
    } else if (message.role === 'user') {
      add('user', [{ type: 'text', text: textOf(message.content) }]);
    } else if (message.role === 'assistant') {
      const text = textOf(message.content);
      const blocks: Block[] = text === '' ? [] : [{ type: 'text', text }];
      for (const call of message.tool_calls ?? []) {
        if (call.type !== 'function') continue;
        blocks.push({
          type: 'tool_use',
          id: call.id,
          name: call.function.name,
          input: inputOf(call.function.arguments),
        });
      }
      // An empty answer has no block Anthropic takes (it refuses empty text): the turn is left out.
      add('assistant', blocks);
    } else if (message.role === 'tool') {
      add('user', [{ type: 'tool_result', tool_use_id: message.tool_call_id, content: textOf(message.content) }]);
    }
  }
  return { system, turns };
}

/** The breakpoint a block gets, with its time to live (Anthropic's default, 5 minutes, is not spelled out). */
export function cacheControl(promptCache: Exclude<PromptCache, 'off'>): CacheControl {
  return promptCache === '1h' ? { type: 'ephemeral', ttl: '1h' } : { type: 'ephemeral' };
}

/** A copy of the block with a breakpoint on it. */
function marked<T extends Block | Anthropic.Messages.Tool>(block: T, control: CacheControl): T {
  return { ...block, cache_control: control };
}

/**
 * Anthropic's request for a chat completion's parameters, with cache breakpoints placed unless `promptCache` is
 * `off` (at most 3 of Anthropic's 4):
 *
 * 1. after tools + system (on the last system block, else the last tool): the prefix every step and every item with
 *    the same system and tools share;
 * 2. at the end of the previous step's conversation (the last block of the turn before the last assistant turn): the
 *    exact prefix the step before wrote, so a step reads it however many blocks its tool calls added since (Anthropic
 *    looks back only 20 blocks from a breakpoint);
 * 3. at the end of the conversation so far: what the next step will read.
 *
 * 2 and 3 only for an agent's step (a request with tools): a plain task has no next step to read its conversation, and
 * writing it would cost 1.25x (or 2x) its input for nothing. A prefix shorter than the model's minimum is not cached
 * (nor billed as written) by Anthropic, so the breakpoints are placed whatever the length.
 */
export function anthropicRequest(
  params: ChatCompletionCreateParamsNonStreaming,
  promptCache: PromptCache,
): Anthropic.Messages.MessageCreateParamsNonStreaming {
  const { system, turns } = messagesOf(params.messages);
  let tools: Anthropic.Messages.Tool[] = (params.tools ?? []).flatMap((tool) =>
    tool.type === 'function'
      ? [
          {
            name: tool.function.name,
            ...(tool.function.description === undefined ? {} : { description: tool.function.description }),
            input_schema: (tool.function.parameters ?? {
              type: 'object',
              properties: {},
            }) as Anthropic.Messages.Tool.InputSchema,
          },
        ]
      : [],
  );
  let systemBlocks = system;
  if (promptCache !== 'off') {
    const control = cacheControl(promptCache);
    if (systemBlocks.length > 0)
      systemBlocks = [...systemBlocks.slice(0, -1), marked(systemBlocks[systemBlocks.length - 1], control)];
    else if (tools.length > 0) tools = [...tools.slice(0, -1), marked(tools[tools.length - 1], control)];
    if (tools.length > 0) markConversation(turns, control);
  }
  return {
    model: params.model,
    max_tokens: params.max_tokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
    ...(systemBlocks.length === 0 ? {} : { system: systemBlocks }),
    messages: turns,
    ...(tools.length === 0 ? {} : { tools }),
    ...(params.temperature === undefined || params.temperature === null ? {} : { temperature: params.temperature }),
  };
}

/** Breakpoints 2 and 3 of anthropicRequest, in place. */
function markConversation(turns: { role: 'user' | 'assistant'; content: Block[] }[], control: CacheControl): void {
  let lastAssistant = turns.length - 1;
  while (lastAssistant >= 0 && turns[lastAssistant].role !== 'assistant') lastAssistant -= 1;
  const ends = new Set([turns.length - 1, ...(lastAssistant > 0 ? [lastAssistant - 1] : [])]);
  for (const index of ends) {
    const turn = turns[index];
    if (turn === undefined) continue;
    turns[index] = { ...turn, content: [...turn.content.slice(0, -1), marked(turn.content.at(-1) as Block, control)] };
  }
}

const FINISH_REASONS: Record<string, ChatCompletion.Choice['finish_reason']> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  pause_turn: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool_calls',
  refusal: 'content_filter',
};

/**
 * Anthropic's usage as a chat completion's: `prompt_tokens` counts every input token (Anthropic's `input_tokens`
 * leaves out its cache reads and writes), the reads as OpenAI's `cached_tokens`, the writes by time to live (all of
 * them to the request's own when the provider does not split them).
 */
export function usageOf(
  usage: Anthropic.Messages.Usage,
  promptCache: PromptCache,
): NonNullable<ChatCompletion['usage']> & CacheWriteUsage {
  const read = usage.cache_read_input_tokens ?? 0;
  const written = usage.cache_creation_input_tokens ?? 0;
  const split = usage.cache_creation;
  const write1h = split ? split.ephemeral_1h_input_tokens : promptCache === '1h' ? written : 0;
  const write5m = split ? split.ephemeral_5m_input_tokens : written - write1h;
  const promptTokens = usage.input_tokens + read + written;
  return {
    prompt_tokens: promptTokens,
    completion_tokens: usage.output_tokens,
    total_tokens: promptTokens + usage.output_tokens,
    prompt_tokens_details: { cached_tokens: read },
    ...(write5m > 0 ? { cache_write_5m_tokens: write5m } : {}),
    ...(write1h > 0 ? { cache_write_1h_tokens: write1h } : {}),
  };
}

/** Anthropic's answer as a chat completion: text blocks joined, `tool_use` blocks as tool calls (in order). */
export function completionOf(message: Anthropic.Messages.Message, promptCache: PromptCache): ChatCompletion {
  const text = message.content.flatMap((block) => (block.type === 'text' ? [block.text] : [])).join('');
  const calls: ChatCompletionMessageToolCall[] = message.content.flatMap((block) =>
    block.type === 'tool_use'
      ? [
          {
            id: block.id,
            type: 'function' as const,
            function: { name: block.name, arguments: JSON.stringify(block.input) },
          },
        ]
      : [],
  );
  return {
    id: message.id,
    object: 'chat.completion',
    created: 0,
    model: message.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: calls.length > 0 && text === '' ? null : text,
          refusal: null,
          ...(calls.length > 0 ? { tool_calls: calls } : {}),
        },
        finish_reason: FINISH_REASONS[message.stop_reason ?? 'end_turn'] ?? 'stop',
        logprobs: null,
      },
    ],
    usage: usageOf(message.usage, promptCache),
  };
}

/**
 * Anthropic's failure as the OpenAI client's, so provider-errors.ts (the one place that decides what Temporal retries)
 * and the 429 handling read both alike: an HTTP error keeps its status, headers (Retry-After, the rate limits) and
 * message; a timeout or a connection failure keeps its kind. An abort is left as it is: the caller reads its own signal.
 */
function asOpenAiError(error: unknown): unknown {
  // Only an Anthropic call fails here, so its SDK is loaded already; not loaded with this module (llm-client.ts).
  const {
    APIError: AnthropicApiError,
    APIConnectionTimeoutError,
    APIUserAbortError,
  } = require('@anthropic-ai/sdk') as typeof import('@anthropic-ai/sdk');
  if (error instanceof APIUserAbortError) return error;
  if (error instanceof APIConnectionTimeoutError) return new OpenAI.APIConnectionTimeoutError();
  if (error instanceof AnthropicApiError) {
    if (error.status === undefined || error.headers === undefined)
      return new OpenAI.APIConnectionError({ message: error.message, cause: error });
    return OpenAI.APIError.generate(error.status, error.error, error.message, error.headers);
  }
  return error;
}

/**
 * The sync path's Anthropic call: a chat completion's parameters sent to Anthropic's Messages API (`messages.create`),
 * the answer handed back as a chat completion, so sendChat treats both providers alike (pacing, errors, usage, the
 * transcript). `options` are the OpenAI client's request options: the signal, headers and timeout are passed on, and
 * retries stay off.
 */
export async function anthropicAsChat(
  client: MessagesClient,
  params: ChatCompletionCreateParamsNonStreaming,
  promptCache: PromptCache,
  options: RequestOptions,
): Promise<{ data: ChatCompletion; response: Response }> {
  try {
    const { data, response } = await client.messages
      .create(anthropicRequest(params, promptCache), {
        ...(options.signal ? { signal: options.signal } : {}),
        ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
        headers: options.headers as Record<string, string>,
        maxRetries: 0,
      })
      .withResponse();
    return { data: completionOf(data, promptCache), response };
  } catch (error) {
    throw asOpenAiError(error);
  }
}
