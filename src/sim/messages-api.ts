import { anthropicUsageOf, type CacheUsage } from './anthropic-prompt-cache';

/**
 * The simulator's Anthropic Messages API (`POST /v1/messages`): a request is answered by the same machinery as a chat
 * completion (latency, faults, rate limits, scripted tool calls), translated on the way in and out here.
 */

interface AnthropicBlock {
  type?: string;
  text?: string;
  id?: string;
  name?: string;
  input?: unknown;
  tool_use_id?: string;
  content?: unknown;
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return (content as AnthropicBlock[]).map((block) => (block.type === 'text' ? (block.text ?? '') : '')).join('');
  return '';
}

/** A Messages API request body as the chat completion body the simulator answers. */
export function messagesRequestAsChat(body: Record<string, unknown>): Record<string, unknown> {
  const messages: Record<string, unknown>[] = [];
  const system = textOf(body.system);
  if (system !== '') messages.push({ role: 'system', content: system });
  for (const message of Array.isArray(body.messages) ? (body.messages as { role?: string; content?: unknown }[]) : []) {
    const blocks: AnthropicBlock[] =
      typeof message.content === 'string'
        ? [{ type: 'text', text: message.content }]
        : Array.isArray(message.content)
          ? (message.content as AnthropicBlock[])
          : [];
    if (message.role === 'assistant') {
      const calls = blocks
        .filter((block) => block.type === 'tool_use')
        .map((block) => ({
          id: block.id,
          type: 'function',
          function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) },
        }));
      messages.push({
        role: 'assistant',
        content: textOf(blocks) === '' && calls.length > 0 ? null : textOf(blocks),
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
      });
      continue;
    }
    for (const block of blocks)
      if (block.type === 'tool_result')
        messages.push({ role: 'tool', tool_call_id: block.tool_use_id, content: textOf(block.content) });
    const text = textOf(blocks);
    if (text !== '' || blocks.every((block) => block.type !== 'tool_result'))
      messages.push({ role: 'user', content: text });
  }
  return { model: body.model, messages, max_tokens: body.max_tokens };
}

const STOP_REASONS: Record<string, string> = { tool_calls: 'tool_use', length: 'max_tokens' };

/** A chat completion the simulator answered, as a Messages API response with the request's cache usage. */
export function chatReplyAsMessage(reply: Record<string, unknown>, cache: CacheUsage): Record<string, unknown> {
  const choice = (
    reply.choices as
      | {
          message?: {
            content?: string | null;
            tool_calls?: { id: string; function: { name: string; arguments: string } }[];
          };
          finish_reason?: string;
        }[]
      | undefined
  )?.[0];
  const usage = reply.usage as { completion_tokens: number } | undefined;
  const text = choice?.message?.content ?? '';
  const content: Record<string, unknown>[] = text === '' ? [] : [{ type: 'text', text }];
  for (const call of choice?.message?.tool_calls ?? []) {
    let input: unknown;
    try {
      input = JSON.parse(call.function.arguments);
    } catch {
      input = {};
    }
    content.push({ type: 'tool_use', id: call.id, name: call.function.name, input });
  }
  return {
    id: `msg_sim_${String(reply.id)}`,
    type: 'message',
    role: 'assistant',
    model: reply.model,
    content,
    stop_reason: STOP_REASONS[choice?.finish_reason ?? ''] ?? 'end_turn',
    stop_sequence: null,
    usage: anthropicUsageOf(cache, usage?.completion_tokens ?? 0),
  };
}

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  529: 'overloaded_error',
};

/** Anthropic's error body for a status. */
export function anthropicError(status: number, message: string): Record<string, unknown> {
  return { type: 'error', error: { type: ERROR_TYPES[status] ?? 'api_error', message } };
}

/**
 * The simulated rate-limit headers (OpenAI's `x-ratelimit-*`) as Anthropic names them: `anthropic-ratelimit-<kind>-
 * limit | remaining | reset`, the reset an RFC 3339 time rather than a duration.
 */
export function anthropicRateLimitHeaders(
  headers: Record<string, string>,
  parseDuration: (text: string) => number | undefined,
  now: number = Date.now(),
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const match = /^x-ratelimit-(limit|remaining|reset)-(requests|tokens)$/.exec(name);
    if (!match) {
      out[name] = value;
      continue;
    }
    const [, field, kind] = match;
    out[`anthropic-ratelimit-${kind}-${field}`] =
      field === 'reset' ? new Date(now + (parseDuration(value) ?? 0)).toISOString() : value;
  }
  return out;
}
