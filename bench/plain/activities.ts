import OpenAI from 'openai';

/** One item of work, as a plain project would pass it: an id and a prompt. */
export interface PlainTask {
  id: string;
  prompt: string;
}

/**
 * The baseline's one activity: a chat completion through the `openai` client. Its retries are off because Temporal
 * owns them (the SDK's guidance for any client with its own retry loop). No heartbeats: a plain project would not add
 * them for a call this short.
 */
export function createPlainActivities(openai: OpenAI, model = 'gpt-4o-mini') {
  return {
    async callModel(task: PlainTask): Promise<string> {
      const completion = await openai.chat.completions.create({
        model,
        messages: [{ role: 'user', content: task.prompt }],
      });
      return completion.choices[0]?.message.content ?? '';
    },
  };
}

export type PlainActivities = ReturnType<typeof createPlainActivities>;

/** One message of an agent's conversation, as the chat completions API takes and returns it. */
export interface PlainMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

/** The one tool of the agents benchmark: waits `ms` milliseconds, as a tool that calls a slow service would. */
export const PLAIN_WAIT_TOOL = {
  type: 'function' as const,
  function: {
    name: 'wait',
    description: 'Waits a number of milliseconds',
    parameters: { type: 'object', properties: { ms: { type: 'integer' } }, required: ['ms'] },
  },
};

/**
 * The agent loop's activities, the way Temporal's AI SDK and OpenAI Agents integrations split it: one activity per
 * model call (the whole transcript in, the assistant's message out) and one per tool call.
 */
export function createPlainAgentActivities(openai: OpenAI, model = 'gpt-4o-mini') {
  return {
    async invokeModel(messages: PlainMessage[]): Promise<PlainMessage> {
      const completion = await openai.chat.completions.create({
        model,
        messages: messages as OpenAI.Chat.ChatCompletionMessageParam[],
        tools: [PLAIN_WAIT_TOOL],
      });
      const message = completion.choices[0]?.message;
      return {
        role: 'assistant',
        content: message?.content ?? null,
        ...(message?.tool_calls?.length
          ? {
              tool_calls: message.tool_calls.flatMap((call) =>
                call.type === 'function' ? [{ id: call.id, type: 'function' as const, function: call.function }] : [],
              ),
            }
          : {}),
      };
    },
    async runTool(call: { name: string; arguments: string }): Promise<string> {
      const { ms } = JSON.parse(call.arguments) as { ms: number };
      await new Promise((resolve) => setTimeout(resolve, ms));
      return `waited ${ms} ms`;
    },
  };
}

export type PlainAgentActivities = ReturnType<typeof createPlainAgentActivities>;
