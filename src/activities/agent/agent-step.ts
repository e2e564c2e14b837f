import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { segmentName } from '../../contract/location';
import type { PayloadRef } from '../../contract/payload-ref';
import type { PriceTable } from '../../pricing';
import { withCallCost } from '../../answer-cache/call-cost';
import { usageFromChat } from '../../llm/token-usage';
import type { PayloadStore } from '../../store';
import { ToolInputError } from '../../tools/define-tool';
import { McpServerUnavailableError } from '../../tools/mcp';
import type { RegisteredTool, ToolRegistry } from '../../tools/registry';
import type { ToolPrepareContext } from '../../tools/workflow-tool';
import {
  AgentFailureType,
  INLINE_MESSAGE_BYTES,
  isMessageRef,
  type AgentNextStep,
  type AgentStepInput,
  type AgentStepResult,
  type NextAnswer,
  type NextRepair,
  type ToolCallRequest,
} from '../../contract/agent-loop';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { sendChat, type ChatDependencies } from '../../llm/send-chat';
import { materialise, runPrefix, storageFailure } from '../model-call';
import type { ChatMessage, MessageEntry, MessageStore } from './message-store';
import { outputInstruction, validateAnswer } from './structured-output';

/** The model call's (ChatDependencies: client, default model, clock, pacer, heartbeats), and the step's own. */
export interface AgentStepDependencies extends ChatDependencies {
  store: PayloadStore;
  prices: PriceTable;
  tools: ToolRegistry;
  messages: MessageStore;
}

/** `search("temporal batch")`: a call's arguments shortened to a line. */
export function summariseCall(name: string, argumentsText: string): string {
  let shown: string;
  try {
    const value = JSON.parse(argumentsText) as unknown;
    shown =
      typeof value === 'object' && value !== null && !Array.isArray(value)
        ? Object.values(value)
            .map((entry) => JSON.stringify(entry))
            .join(', ')
        : JSON.stringify(value);
  } catch {
    shown = argumentsText;
  }
  return `${name}(${shown.length > 80 ? `${shown.slice(0, 77)}...` : shown})`;
}

/**
 * A call the model asked for as the workflow will run it: by its tool's runner, a workflow tool's arguments prepared
 * into the workflow's input; or refused with why (no such tool offered, arguments that do not fit).
 */
async function toolCallRequest(
  call: { id: string; function: { name: string; arguments: string } },
  offered: readonly RegisteredTool[],
  context: ToolPrepareContext,
): Promise<ToolCallRequest> {
  const { name, arguments: argumentsText } = call.function;
  // Small arguments travel with the call (history holds small values): its toolCall activity then reads no file.
  const base = {
    id: call.id,
    name,
    summary: summariseCall(name, argumentsText),
    ...(typeof argumentsText === 'string' && Buffer.byteLength(argumentsText) <= INLINE_MESSAGE_BYTES
      ? { arguments: argumentsText }
      : {}),
  };
  const tool = offered.find((candidate) => candidate.name === name);
  if (!tool) {
    const names = offered.map((candidate) => candidate.name).join(', ');
    return { ...base, runner: 'none', invalid: `there is no tool "${name}"; the tools are: ${names || 'none'}` };
  }
  if (tool.runner === 'activity')
    return {
      ...base,
      runner: 'activity',
      ...(tool.approvalTimeoutMs === undefined ? {} : { approvalTimeoutMs: tool.approvalTimeoutMs }),
    };
  let parsed: unknown;
  try {
    parsed = JSON.parse(argumentsText);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return { ...base, runner: 'none', invalid: `the arguments are not JSON (${why})` };
  }
  try {
    return { ...base, runner: 'workflow', name: tool.name, input: await tool.prepare(parsed, context) };
  } catch (error) {
    if (error instanceof ToolInputError) return { ...base, runner: 'none', invalid: error.message };
    throw error;
  }
}

/** What a step without tool calls leads to: its answer (validated against `output`, stored when large) or a repair. */
async function answerOf(
  content: string,
  input: AgentStepInput,
  dependencies: AgentStepDependencies,
): Promise<NextAnswer | NextRepair> {
  const task = input.task;
  let output = content;
  if (task.output !== undefined) {
    const checked = validateAnswer(output, task.output);
    if ('invalid' in checked) return { next: 'repair', invalid: checked.invalid };
    output = checked.json;
  }
  if (Buffer.byteLength(output) <= input.inlineOutputBytes && !input.storeOutput) return { next: 'answer', output };
  let outputRef: PayloadRef;
  try {
    outputRef = await dependencies.store.put(`${runPrefix()}/outputs/${segmentName(task.id)}`, output);
  } catch (error) {
    return storageFailure(error, `storing the answer of agent "${task.id}"`);
  }
  return Buffer.byteLength(output) > input.inlineOutputBytes
    ? { next: 'answer', outputRef }
    : { next: 'answer', output, outputRef };
}

/** The transcript's messages before this step's call, and its entries (MessageEntry: small ones inline, else stored). */
async function conversation(
  input: AgentStepInput,
  dependencies: AgentStepDependencies,
): Promise<{ entries: MessageEntry[]; messages: ChatMessage[] }> {
  const store = dependencies.messages;
  let entries: MessageEntry[];
  let messages: ChatMessage[];
  if (input.transcript) {
    entries = [...(await store.getTranscript(input.transcript))];
    messages = await Promise.all(entries.map((entry) => store.read(entry)));
  } else {
    const task = await materialise(
      { task: input.task, inlineOutputBytes: 0, dependencies: input.dependencies, synthesis: input.synthesis },
      dependencies.store,
    );
    messages = [
      ...(task.system === undefined ? [] : [{ role: 'system', content: task.system }]),
      ...(task.output === undefined ? [] : [{ role: 'system', content: outputInstruction(task.output) }]),
      { role: 'user', content: task.prompt },
    ];
    entries = await Promise.all(messages.map((message) => store.entry(message)));
  }
  for (const entry of input.append ?? []) {
    entries.push(entry);
    messages.push(await store.read(entry));
  }
  if (input.note !== undefined) {
    const note = { role: 'user', content: input.note };
    entries.push(await store.entry(note));
    messages.push(note);
  }
  return { entries, messages };
}

/** The initial messages of the inline (benchmark) mode: as above, without the store. */
async function inlineConversation(input: AgentStepInput, dependencies: AgentStepDependencies): Promise<ChatMessage[]> {
  const messages = [...(input.inlineMessages as ChatMessage[])];
  if (messages.length === 0) {
    const task = await materialise({ task: input.task, inlineOutputBytes: 0 }, dependencies.store);
    messages.push(...(task.system === undefined ? [] : [{ role: 'system', content: task.system }]), {
      role: 'user',
      content: task.prompt,
    });
  }
  if (input.note !== undefined) messages.push({ role: 'user', content: input.note });
  return messages;
}

/**
 * One model step of an agent: the transcript (by reference) plus the new messages goes to the model with the task's
 * tools (from the registry, less those the workflow withholds); the answer is stored and the transcript's new reference
 * returned, with what the agent does next: run the tool calls asked for (names, a summary, and their arguments where
 * small, else read from the stored message; a workflow tool's prepared here), end with the answer, or repair an answer
 * that does not match `output`.
 */
export function createAgentStep(dependencies: AgentStepDependencies) {
  return async function agentStep(input: AgentStepInput): Promise<AgentStepResult> {
    const context = Context.current();
    const { info } = context;
    const task = input.task;
    const wanted = (task.tools ?? []).filter((name) => !input.withheld?.includes(name));
    const { tools: offered, unknown } = await dependencies.tools.resolve(wanted).catch((error: unknown) => {
      if (!(error instanceof McpServerUnavailableError)) throw error;
      throw ApplicationFailure.create({
        type: AgentFailureType.ToolUnavailable,
        message: `agent "${task.id}" step ${input.step}: its tools cannot be listed: ${error.message}`,
        details: [{ attempt: info.attempt }],
      });
    });
    if (unknown.length > 0) {
      throw ApplicationFailure.create({
        type: AgentFailureType.UnknownTool,
        message: `agent "${task.id}" names tools no worker offers: ${unknown.join(', ')} (register them with defineTool or an MCP server on the workers)`,
        nonRetryable: true,
      });
    }
    const inline = input.inlineMessages !== undefined;
    const { entries, messages } = inline
      ? { entries: [], messages: await inlineConversation(input, dependencies) }
      : await conversation(input, dependencies);

    const model = task.model ?? dependencies.defaultModel;
    // The same call path as a plain task's: its pacing, the attempt's own deadline (agentTimeoutMs), its aborts.
    const { completion, choice, durationMs, cached } = await sendChat(
      {
        taskId: task.id,
        label: `agent "${task.id}" step ${input.step}`,
        model,
        messages: messages as ChatCompletionMessageParam[],
        tools: offered.map((tool) => ({
          type: 'function' as const,
          function: { name: tool.name, description: tool.description, parameters: tool.parameters },
        })),
        ...(task.temperature === undefined ? {} : { temperature: task.temperature }),
        ...(task.maxTokens === undefined ? {} : { maxTokens: task.maxTokens }),
        ...(task.promptCacheKey === undefined ? {} : { promptCacheKey: task.promptCacheKey }),
        headers: { 'x-fanout-step': String(input.step) },
        ...(task.provider === undefined ? {} : { provider: task.provider }),
        ...(task.promptCache === undefined ? {} : { promptCache: task.promptCache }),
      },
      dependencies,
      task.cache ? { cache: task.cache } : {},
    );
    const calls = (choice.message.tool_calls ?? []).filter((call) => call.type === 'function');
    const assistant: ChatMessage = {
      role: 'assistant',
      content: choice.message.content ?? null,
      ...(calls.length > 0
        ? {
            tool_calls: calls.map((call) => ({
              id: call.id,
              type: 'function',
              function: { name: call.function.name, arguments: call.function.arguments },
            })),
          }
        : {}),
    };
    // One write for the step when its messages are small: the transcript, the assistant message inline at its end (the
    // step then returns no `assistant` reference: a call's arguments travel with it, or are read from the transcript).
    const store = dependencies.messages;
    const assistantEntry = inline ? undefined : await store.entry(assistant);
    const transcript = assistantEntry ? await store.putTranscript([...entries, assistantEntry]) : undefined;
    const assistantRef = assistantEntry && (isMessageRef(assistantEntry) ? assistantEntry : transcript);

    let next: AgentNextStep;
    if (calls.length > 0) {
      const prepare = {
        task,
        step: input.step,
        storeInput: async (name: string, content: string, what: string) => {
          try {
            return await dependencies.store.put(`${runPrefix()}/inputs/${segmentName(name)}`, content);
          } catch (error) {
            return storageFailure(error, what);
          }
        },
      };
      const requests: ToolCallRequest[] = [];
      for (const [index, call] of calls.entries())
        requests.push(await toolCallRequest(call, offered, { ...prepare, index }));
      next = { next: 'tools', calls: requests };
    } else next = await answerOf(choice.message.content ?? '', input, dependencies);
    const usage = usageFromChat(completion.usage);
    const priced = withCallCost({ model: completion.model ?? model, usage, cached }, dependencies.prices);
    const placeholder: PayloadRef = { uri: 'inline', bytes: 0, sha256: '0'.repeat(64) };
    return {
      transcript: transcript ?? placeholder,
      ...(assistantRef === undefined || assistantRef === transcript ? {} : { assistant: assistantRef }),
      ...next,
      model: priced.model,
      finishReason: choice.finish_reason ?? null,
      ...(priced.usage ? { usage: priced.usage } : {}),
      ...(priced.costUsd === undefined
        ? { unpriced: true }
        : {
            costUsd: priced.costUsd,
            ...(priced.cacheSavingsUsd === undefined ? {} : { cacheSavingsUsd: priced.cacheSavingsUsd }),
          }),
      ...(priced.cached ? { cached: true } : {}),
      ...(priced.savedUsd === undefined ? {} : { savedUsd: priced.savedUsd }),
      attempt: info.attempt,
      durationMs,
      ...(inline ? { inlineMessages: [...messages, assistant] } : {}),
    };
  };
}
