import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import { agentTaskSchema, type AgentTask } from '../../contract/agent-task';
import { segmentName } from '../../contract/location';
import type { PayloadRef } from '../../contract/payload-ref';
import type { PriceTable } from '../../pricing';
import { withCost } from '../../pricing/price-of';
import type { PayloadStore } from '../../store';
import { McpServerUnavailableError } from '../../tools/mcp';
import type { ToolRegistry } from '../../tools/registry';
import {
  AgentFailureType,
  MAX_SPAWNED_AGENTS,
  SPAWN_AGENTS_TOOL,
  type AgentStepInput,
  type AgentStepResult,
  type ToolCallRequest,
} from '../../contract/agent-loop';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { sendChat, type ChatDependencies } from '../../llm/send-chat';
import { materialise, runPrefix, storageFailure } from '../model-call';
import type { ChatMessage, MessageStore } from './message-store';
import { outputInstruction, validateAnswer } from './structured-output';

/** The model call's (ChatDependencies: client, default model, clock, pacer, heartbeats), and the step's own. */
export interface AgentStepDependencies extends ChatDependencies {
  store: PayloadStore;
  prices: PriceTable;
  tools: ToolRegistry;
  messages: MessageStore;
}

/** What the model is told `spawn_agents` takes. */
const SPAWN_PARAMETERS = {
  type: 'object',
  properties: {
    tasks: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_SPAWNED_AGENTS,
      description: 'One entry per sub-agent; they run in parallel and their answers come back in this order.',
      items: {
        type: 'object',
        properties: {
          prompt: { type: 'string', description: "The sub-agent's task." },
          system: { type: 'string' },
          tools: {
            type: 'array',
            items: { type: 'string' },
            description: 'Tools the sub-agent may use (a subset of yours).',
          },
          maxSteps: { type: 'integer', minimum: 1 },
        },
        required: ['prompt'],
      },
    },
  },
  required: ['tasks'],
};

const spawnArgumentsSchema = z.object({
  tasks: z
    .array(
      z.object({
        prompt: z.string().min(1),
        system: z.string().optional(),
        tools: z.array(z.string()).optional(),
        maxSteps: z.number().int().min(1).max(10_000).optional(),
      }),
    )
    .min(1)
    .max(MAX_SPAWNED_AGENTS),
});

/** Prompts of sub-agents over this size go to the store, as large prompts of any task do. */
const INLINE_PROMPT_BYTES = 4096;

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

/** The sub-agents' tasks of a `spawn_agents` call, validated; or why the call is invalid. */
async function spawnTasks(
  parent: AgentTask,
  step: number,
  callIndex: number,
  argumentsText: string,
  store: PayloadStore,
): Promise<AgentTask[] | string> {
  let parsed;
  try {
    parsed = spawnArgumentsSchema.safeParse(JSON.parse(argumentsText));
  } catch (error) {
    return `the arguments are not JSON (${error instanceof Error ? error.message : String(error)})`;
  }
  if (!parsed.success) return `invalid arguments: ${z.prettifyError(parsed.error).replace(/\n/g, '; ')}`;
  const allowed = new Set(parent.tools ?? []);
  const tasks: AgentTask[] = [];
  for (const [index, spec] of parsed.data.tasks.entries()) {
    const outside = (spec.tools ?? []).filter((tool) => !allowed.has(tool));
    if (outside.length > 0) return `task ${index + 1} asks for tools this agent does not have: ${outside.join(', ')}`;
    const id = `${parent.id}.${step}-${callIndex + 1}-${index + 1}`.slice(-128);
    let task: AgentTask = {
      id,
      name: `${parent.name ?? parent.id} / sub-agent ${index + 1}`,
      prompt: spec.prompt,
      ...(spec.system === undefined ? {} : { system: spec.system }),
      ...(parent.model === undefined ? {} : { model: parent.model }),
      ...(spec.tools === undefined ? {} : { tools: spec.tools }),
      ...(spec.maxSteps === undefined ? {} : { maxSteps: spec.maxSteps }),
    };
    if (Buffer.byteLength(spec.prompt) + Buffer.byteLength(spec.system ?? '') > INLINE_PROMPT_BYTES) {
      try {
        const contentRef = await store.put(
          `${runPrefix()}/inputs/${segmentName(id)}`,
          JSON.stringify({ prompt: spec.prompt, system: spec.system }),
        );
        const { system: _system, ...rest } = task;
        task = { ...rest, prompt: `${spec.prompt.slice(0, 200)}… (stored)`, contentRef };
      } catch (error) {
        return storageFailure(error, `storing the prompt of sub-agent ${id}`);
      }
    }
    const checked = agentTaskSchema.safeParse(task);
    if (!checked.success) return `task ${index + 1}: ${z.prettifyError(checked.error).replace(/\n/g, '; ')}`;
    tasks.push(checked.data);
  }
  return tasks;
}

/** The transcript's messages before this step's call, stored, and their references. */
async function conversation(
  input: AgentStepInput,
  dependencies: AgentStepDependencies,
): Promise<{ refs: PayloadRef[]; messages: ChatMessage[] }> {
  const store = dependencies.messages;
  let refs: PayloadRef[];
  let messages: ChatMessage[];
  if (input.transcript) {
    refs = [...(await store.getTranscript(input.transcript))];
    messages = await Promise.all(refs.map((ref) => store.getMessage(ref)));
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
    refs = await Promise.all(messages.map((message) => store.putMessage(message)));
  }
  for (const ref of input.append ?? []) {
    refs.push(ref);
    messages.push(await store.getMessage(ref));
  }
  if (input.note !== undefined) {
    const note = { role: 'user', content: input.note };
    refs.push(await store.putMessage(note));
    messages.push(note);
  }
  return { refs, messages };
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
 * tools; the answer is stored and the transcript's new reference returned, with the tool calls asked for (names and
 * a summary; their arguments stay in the stored message) or the final answer, validated against `output` when set.
 */
export function createAgentStep(dependencies: AgentStepDependencies) {
  return async function agentStep(input: AgentStepInput): Promise<AgentStepResult> {
    const context = Context.current();
    const { info } = context;
    const task = input.task;
    const wanted = (task.tools ?? []).filter((name) => name !== SPAWN_AGENTS_TOOL);
    const { tools, unknown } = await dependencies.tools.resolve(wanted).catch((error: unknown) => {
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
    const offered = [
      ...tools.map((tool) => ({
        type: 'function' as const,
        function: { name: tool.name, description: tool.description, parameters: tool.parameters },
      })),
      ...((task.tools ?? []).includes(SPAWN_AGENTS_TOOL) && input.canSpawn
        ? [
            {
              type: 'function' as const,
              function: {
                name: SPAWN_AGENTS_TOOL,
                description: 'Runs sub-agents in parallel and returns their answers in task order.',
                parameters: SPAWN_PARAMETERS,
              },
            },
          ]
        : []),
    ];
    const inline = input.inlineMessages !== undefined;
    const { refs, messages } = inline
      ? { refs: [], messages: await inlineConversation(input, dependencies) }
      : await conversation(input, dependencies);

    const model = task.model ?? dependencies.defaultModel;
    // The same call path as a plain task's: its pacing, the attempt's own deadline (agentTimeoutMs), its aborts.
    const { completion, choice, durationMs } = await sendChat(
      {
        taskId: task.id,
        label: `agent "${task.id}" step ${input.step}`,
        model,
        messages: messages as ChatCompletionMessageParam[],
        tools: offered,
        ...(task.temperature === undefined ? {} : { temperature: task.temperature }),
        ...(task.maxTokens === undefined ? {} : { maxTokens: task.maxTokens }),
        headers: { 'x-fanout-step': String(input.step) },
      },
      dependencies,
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
    const store = dependencies.messages;
    const assistantRef = inline ? undefined : await store.putMessage(assistant);
    const transcript = assistantRef ? await store.putTranscript([...refs, assistantRef]) : undefined;

    const offeredNames = new Set(offered.map((tool) => tool.function.name));
    const toolCalls: ToolCallRequest[] = [];
    for (const [index, call] of calls.entries()) {
      const request: ToolCallRequest = {
        id: call.id,
        name: call.function.name,
        summary: summariseCall(call.function.name, call.function.arguments),
      };
      if (!offeredNames.has(call.function.name))
        request.invalid = `there is no tool "${call.function.name}"; the tools are: ${[...offeredNames].join(', ') || 'none'}`;
      else if (call.function.name === SPAWN_AGENTS_TOOL) {
        const spawned = await spawnTasks(task, input.step, index, call.function.arguments, dependencies.store);
        if (typeof spawned === 'string') request.invalid = spawned;
        else request.spawn = spawned;
      } else {
        const timeout = tools.find((tool) => tool.name === call.function.name)?.approvalTimeoutMs;
        if (timeout !== undefined) request.approvalTimeoutMs = timeout;
      }
      toolCalls.push(request);
    }

    let answer: AgentStepResult['answer'];
    if (calls.length === 0) {
      let output = choice.message.content ?? '';
      let invalid: string | undefined;
      if (task.output !== undefined) {
        const checked = validateAnswer(output, task.output);
        if ('invalid' in checked) invalid = checked.invalid;
        else output = checked.json;
      }
      if (invalid !== undefined) answer = { invalid };
      else if (Buffer.byteLength(output) > input.inlineOutputBytes || input.storeOutput) {
        let outputRef: PayloadRef;
        try {
          outputRef = await dependencies.store.put(`${runPrefix()}/outputs/${segmentName(task.id)}`, output);
        } catch (error) {
          return storageFailure(error, `storing the answer of agent "${task.id}"`);
        }
        answer = Buffer.byteLength(output) > input.inlineOutputBytes ? { outputRef } : { output, outputRef };
      } else answer = { output };
    }
    const reported = completion.usage;
    const usage = reported
      ? {
          promptTokens: reported.prompt_tokens ?? 0,
          completionTokens: reported.completion_tokens ?? 0,
          totalTokens: reported.total_tokens ?? 0,
        }
      : undefined;
    const priced = withCost({ model: completion.model ?? model, usage }, dependencies.prices);
    const placeholder: PayloadRef = { uri: 'inline', bytes: 0, sha256: '0'.repeat(64) };
    return {
      transcript: transcript ?? placeholder,
      assistant: assistantRef ?? placeholder,
      toolCalls,
      ...(answer ? { answer } : {}),
      model: priced.model,
      finishReason: choice.finish_reason ?? null,
      ...(usage ? { usage } : {}),
      ...(priced.costUsd === undefined ? { unpriced: true } : { costUsd: priced.costUsd }),
      attempt: info.attempt,
      durationMs,
      ...(inline ? { inlineMessages: [...messages, assistant] } : {}),
    };
  };
}
