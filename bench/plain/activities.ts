import { mkdir, open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import OpenAI from 'openai';
import type { PlainAgentResult } from './workflows';

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

/**
 * A design probe, not a baseline of what a plain project writes: the whole agent loop in one activity, each model answer
 * and tool result appended to a journal file and flushed before the loop goes on, so a retried attempt (a worker killed
 * mid-agent) reads the journal and sends no model call that had its answer. It shows what one activity per agent would
 * cost against one per call: no workflow task, history event or action per step, at the price of per-step visibility,
 * per-tool retry policies and anything that needs the workflow mid-agent (approvals, sub-agents).
 */
export function createJournaledAgentActivities(
  openai: OpenAI,
  journalDirectory: string | undefined,
  model = 'gpt-4o-mini',
) {
  const runTool = async (call: { name: string; arguments: string }): Promise<string> => {
    const { ms } = JSON.parse(call.arguments) as { ms: number };
    await new Promise((resolve) => setTimeout(resolve, ms));
    return `waited ${ms} ms`;
  };
  return {
    async journaledAgent(input: { prompt: string; maxSteps: number }): Promise<PlainAgentResult> {
      if (journalDirectory === undefined) throw new Error('PLAIN_JOURNAL_DIR is not set');
      const context = Context.current();
      const { workflowExecution, activityId } = context.info;
      const owner = workflowExecution?.workflowId ?? 'standalone';
      const file = path.join(journalDirectory, `${owner}-${activityId}.jsonl`);
      await mkdir(journalDirectory, { recursive: true });
      // No journal yet is a first attempt; any other read error fails the attempt rather than calling everything again.
      const journaled = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return '';
        throw error;
      });
      // A line cut short by a crash was never flushed, so the loop had not gone past it: it is left out (its call is made
      // again) and the next record starts on a line of its own.
      const messages: PlainMessage[] = [{ role: 'user', content: input.prompt }];
      for (const line of journaled.split('\n')) {
        try {
          if (line !== '') messages.push(JSON.parse(line) as PlainMessage);
        } catch {
          continue;
        }
      }
      const journal = await open(file, 'a');
      if (journaled !== '' && !journaled.endsWith('\n')) await journal.appendFile('\n');
      const append = async (message: PlainMessage) => {
        messages.push(message);
        await journal.appendFile(`${JSON.stringify(message)}\n`);
        await journal.datasync();
      };
      try {
        let steps = messages.filter((message) => message.role === 'assistant').length;
        let toolCalls = messages.filter((message) => message.role === 'tool').length;
        for (;;) {
          let lastIndex = messages.length - 1;
          while (lastIndex > 0 && messages[lastIndex].role !== 'assistant') lastIndex -= 1;
          const last = lastIndex > 0 ? messages[lastIndex] : undefined;
          if (last !== undefined && !last.tool_calls?.length) return { steps, toolCalls, answer: last.content ?? '' };
          const answered = new Set(messages.slice(lastIndex + 1).map((message) => message.tool_call_id));
          const unanswered = (last?.tool_calls ?? []).filter((call) => !answered.has(call.id));
          if (unanswered.length > 0) {
            await Promise.all(
              unanswered.map(async (call) => {
                const content = await runTool(call.function);
                await append({ role: 'tool', tool_call_id: call.id, content });
                toolCalls += 1;
              }),
            );
            continue;
          }
          if (steps >= input.maxSteps) throw new Error(`no answer after ${input.maxSteps} steps`);
          const completion = await openai.chat.completions.create(
            { model, messages: messages as OpenAI.Chat.ChatCompletionMessageParam[], tools: [PLAIN_WAIT_TOOL] },
            { signal: context.cancellationSignal },
          );
          const message = completion.choices[0]?.message;
          await append({
            role: 'assistant',
            content: message?.content ?? null,
            ...(message?.tool_calls?.length
              ? {
                  tool_calls: message.tool_calls.flatMap((call) =>
                    call.type === 'function'
                      ? [{ id: call.id, type: 'function' as const, function: call.function }]
                      : [],
                  ),
                }
              : {}),
          });
          steps += 1;
          context.heartbeat(steps);
        }
      } finally {
        await journal.close();
      }
    },
  };
}

export type JournaledAgentActivities = ReturnType<typeof createJournaledAgentActivities>;
