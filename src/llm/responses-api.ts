import type OpenAI from 'openai';
import type { ChatCompletion, ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import type { RequestOptions } from 'openai/internal/request-options';

/**
 * The sync path's Responses API call: a chat completion's parameters sent to `/v1/responses`, the answer handed back as
 * a chat completion, so the agent activity treats both APIs alike (pacing, errors, usage). The system prompt becomes
 * `instructions`, the user prompt `input`, `max_tokens` `max_output_tokens`.
 */
export async function responsesAsChat(
  client: Pick<OpenAI, 'responses'>,
  params: ChatCompletionCreateParamsNonStreaming,
  options: RequestOptions,
): Promise<{ data: ChatCompletion; response: Response }> {
  const system = params.messages.find((message) => message.role === 'system')?.content;
  const user = [...params.messages].reverse().find((message) => message.role === 'user')?.content;
  const { data, response } = await client.responses
    .create(
      {
        model: params.model,
        input: typeof user === 'string' ? user : '',
        ...(typeof system === 'string' ? { instructions: system } : {}),
        ...(params.temperature === undefined || params.temperature === null ? {} : { temperature: params.temperature }),
        ...(params.max_tokens === undefined || params.max_tokens === null
          ? {}
          : { max_output_tokens: params.max_tokens }),
        ...(params.service_tier === undefined || params.service_tier === null
          ? {}
          : { service_tier: params.service_tier }),
        ...(params.prompt_cache_key === undefined ? {} : { prompt_cache_key: params.prompt_cache_key }),
      },
      options,
    )
    .withResponse();
  const text = (data.output ?? [])
    .flatMap((item) => (item.type === 'message' ? item.content : []))
    .map((part) => (part.type === 'output_text' ? part.text : ''))
    .join('');
  const completion: ChatCompletion = {
    id: data.id,
    object: 'chat.completion',
    created: Math.floor(data.created_at ?? 0),
    model: data.model,
    service_tier: data.service_tier ?? null,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: text, refusal: null },
        finish_reason: data.status === 'incomplete' ? 'length' : 'stop',
        logprobs: null,
      },
    ],
    ...(data.usage
      ? {
          usage: {
            prompt_tokens: data.usage.input_tokens,
            completion_tokens: data.usage.output_tokens,
            total_tokens: data.usage.total_tokens,
            // Carried over as Chat Completions reports them, so one reader (usageFromChat) prices both APIs.
            prompt_tokens_details: { cached_tokens: data.usage.input_tokens_details?.cached_tokens ?? 0 },
          },
        }
      : {}),
  };
  return { data: completion, response };
}

/** The simulator's side: a Responses API request body as the chat completion body it answers. */
export function responsesRequestAsChat(body: Record<string, unknown>): Record<string, unknown> {
  const input = body.input;
  const messages: { role: string; content: unknown }[] = [];
  if (typeof body.instructions === 'string') messages.push({ role: 'system', content: body.instructions });
  if (typeof input === 'string') messages.push({ role: 'user', content: input });
  else if (Array.isArray(input))
    for (const item of input as { role?: string; content?: unknown }[])
      messages.push({ role: item.role ?? 'user', content: item.content });
  return {
    model: body.model,
    messages,
    max_tokens: body.max_output_tokens,
    service_tier: body.service_tier,
    prompt_cache_key: body.prompt_cache_key,
  };
}

/** The simulator's side: a chat completion it answered, as a Responses API response. */
export function chatReplyAsResponse(reply: Record<string, unknown>): Record<string, unknown> {
  const choice = (reply.choices as { message?: { content?: string }; finish_reason?: string }[] | undefined)?.[0];
  const usage = reply.usage as
    | {
        prompt_tokens: number;
        completion_tokens: number;
        total_tokens: number;
        prompt_tokens_details?: { cached_tokens?: number };
      }
    | undefined;
  return {
    id: `resp_${String(reply.id)}`,
    object: 'response',
    created_at: reply.created,
    status: choice?.finish_reason === 'length' ? 'incomplete' : 'completed',
    model: reply.model,
    service_tier: reply.service_tier,
    output: [
      {
        type: 'message',
        id: `msg_${String(reply.id)}`,
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: choice?.message?.content ?? '', annotations: [] }],
      },
    ],
    usage: usage && {
      input_tokens: usage.prompt_tokens,
      output_tokens: usage.completion_tokens,
      total_tokens: usage.total_tokens,
      input_tokens_details: { cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    },
  };
}
