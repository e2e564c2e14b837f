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
