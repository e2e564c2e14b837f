import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { PayloadStore } from '../../store';
import type { ToolRegistry } from '../../tools/registry';
import { ToolInputError, type Tool } from '../../tools/define-tool';
import { McpServerUnavailableError } from '../../tools/mcp';
import type { WorkflowTool } from '../../tools/workflow-tool';
import { FailureType } from '../../contract/failure-types';
import { AgentFailureType, type ToolCallInput, type ToolCallResult } from '../../contract/agent-loop';
import { storageFailure } from '../model-call';
import { deadlineSignal, watchForCancellation } from '../../llm/cancellation';
import type { ChatMessage, MessageStore } from './message-store';
import { inToolSpan, traceApprovalWait } from '../../telemetry/genai-spans';
import { defaultAnswerCache, type AnswerCache } from '../../answer-cache/answer-cache';
import { toolCallKey } from '../../answer-cache/request-key';

export interface ToolCallDependencies {
  store: PayloadStore;
  tools: ToolRegistry;
  messages: MessageStore;
  /** The answer cache for tools that opted in (`defineTool` `cache`). Default: the process's. */
  answerCache?: AnswerCache;
}

interface FunctionCall {
  id: string;
  function: { name: string; arguments: string };
}

/** The result text of a call the workflow ran (WorkflowTool): the tool's report of what the workflow's run returned. */
async function workflowToolResult(
  tool: WorkflowTool,
  input: ToolCallInput,
  store: PayloadStore,
): Promise<{ text: string; ok: boolean }> {
  if (input.workflowResult === undefined) {
    throw ApplicationFailure.create({
      type: FailureType.InvalidInput,
      message: `agent "${input.taskId}" step ${input.step}: tool "${tool.name}" runs in the workflow, which gave no result`,
      nonRetryable: true,
    });
  }
  return tool.report(input.workflowResult, {
    read: async (ref, what) => {
      try {
        return await store.get(ref);
      } catch (error) {
        return storageFailure(error, what);
      }
    },
  });
}

/** Fails the call (Temporal retries it) when the tool's MCP server cannot be reached: that is no answer of the tool's. */
function failIfUnavailable(error: unknown, input: ToolCallInput, tool: string, attempt: number): void {
  if (!(error instanceof McpServerUnavailableError)) return;
  throw ApplicationFailure.create({
    type: AgentFailureType.ToolUnavailable,
    message: `agent "${input.taskId}" step ${input.step}: tool "${tool}" cannot be reached: ${error.message}`,
    details: [{ attempt }],
  });
}

/**
 * Runs a tool of the worker (a registered function or an MCP tool), aborted by cancellation or its timeout; its failure
 * is its result. Throws only for the agent's cancellation and an MCP server that cannot be reached.
 */
async function runActivityTool(
  tool: Tool | undefined,
  call: FunctionCall,
  input: ToolCallInput,
  context: Context,
  answerCache: AnswerCache,
): Promise<{ text: string; ok: boolean }> {
  const name = call.function.name;
  // Cut off from Temporal so long that a peer runs this call again, the worker aborts its copy.
  const cutOff = new AbortController();
  const stopWatching = watchForCancellation(1000, (reason) => cutOff.abort(reason));
  const deadline = deadlineSignal(
    AbortSignal.any([context.cancellationSignal, cutOff.signal]),
    tool?.timeoutMs ?? 1000,
  );
  try {
    if (!tool) throw new Error(`no worker offers the tool "${name}" any more`);
    const parsed: unknown = call.function.arguments.trim() === '' ? {} : JSON.parse(call.function.arguments);
    const toolContext = {
      signal: deadline.signal,
      taskId: input.taskId,
      callId: call.id,
      workflowId: context.info.workflowExecution?.workflowId ?? '',
    };
    const span = { name, callId: call.id, arguments: call.function.arguments, taskId: input.taskId };
    const run = () => inToolSpan({ ...span, mcpServer: tool.mcpServer }, () => tool.call(parsed, toolContext));
    if (!tool.cacheable || input.cache === undefined) return { text: await run(), ok: true };
    const { value: text } = await answerCache.through(
      input.cache,
      toolCallKey(name, parsed),
      { taskId: input.taskId, label: `tool "${name}" of agent "${input.taskId}" step ${input.step}` },
      run,
      (value): value is string => typeof value === 'string',
    );
    return { text, ok: true };
  } catch (error) {
    // Cancellation is the agent's, not the tool's: it must surface as the SDK's CancelledFailure.
    if (context.cancellationSignal.aborted) throw context.cancellationSignal.reason;
    if (cutOff.signal.aborted) throw cutOff.signal.reason;
    // Under replay a cached tool's miss fails the agent, as a model call's does: it is no result of the tool's.
    if (error instanceof ApplicationFailure && error.type === FailureType.CacheMiss) throw error;
    failIfUnavailable(error, input, name, context.info.attempt);
    const message = deadline.timedOut()
      ? `the tool ran past its ${tool?.timeoutMs} ms timeout`
      : error instanceof SyntaxError
        ? `the arguments are not JSON (${error.message})`
        : error instanceof ToolInputError || error instanceof Error
          ? error.message
          : String(error);
    return { text: `error: ${message}`, ok: false };
  } finally {
    deadline.clear();
    stopWatching();
  }
}

/**
 * One tool call of an agent step: runs the tool the model asked for by where its tool runs (a registered function or an
 * MCP tool here, aborted by cancellation or the tool's timeout; `spawn_agents` in the workflow, whose result the tool
 * reports here), and stores the result as the `tool` message the model reads next. A tool's failure is its result
 * (`error: …`), as providers expect, not a failure of the activity; only the store's failures are, and an MCP server
 * that cannot be reached (ToolUnavailable, retried on a new connection).
 */
export function createToolCall(dependencies: ToolCallDependencies) {
  return async function toolCall(input: ToolCallInput): Promise<ToolCallResult> {
    const context = Context.current();
    let call: FunctionCall;
    if (input.inlineCall)
      call = {
        id: input.inlineCall.id,
        function: { name: input.inlineCall.name, arguments: input.inlineCall.arguments },
      };
    else {
      if (!input.assistant)
        throw ApplicationFailure.create({
          type: FailureType.InvalidInput,
          message: `agent "${input.taskId}" step ${input.step}: tool call ${input.index} names neither the call nor the stored message that holds it`,
          nonRetryable: true,
        });
      const assistant = await dependencies.messages.assistant(input.assistant);
      const calls = (assistant.tool_calls ?? []) as FunctionCall[];
      if (!calls[input.index]) {
        throw ApplicationFailure.create({
          type: FailureType.PayloadUnavailable,
          message: `agent "${input.taskId}" step ${input.step}: no tool call ${input.index}`,
          nonRetryable: true,
        });
      }
      call = calls[input.index];
    }
    // The approval's wait, traced once: by the first attempt (a retry would draw it twice).
    if (input.approval && context.info.attempt === 1)
      traceApprovalWait({ tool: call.function.name, callId: call.id, taskId: input.taskId, ...input.approval });
    let result: { text: string; ok: boolean };
    if (input.denied !== undefined) result = { text: `denied: ${input.denied}`, ok: false };
    else if (input.invalid !== undefined) result = { text: `error: ${input.invalid}`, ok: false };
    else {
      const name = call.function.name;
      const tool = await dependencies.tools.resolve([name]).then(
        ({ tools }) => tools[0],
        (error: unknown) => {
          failIfUnavailable(error, input, name, context.info.attempt);
          throw error;
        },
      );
      result =
        tool?.runner === 'workflow'
          ? await workflowToolResult(tool, input, dependencies.store)
          : await runActivityTool(tool, call, input, context, dependencies.answerCache ?? defaultAnswerCache());
    }
    const { text: content, ok } = result;
    const message: ChatMessage = { role: 'tool', tool_call_id: call.id, content };
    const detail = `${ok ? 'ok' : 'failed'}: ${content.length > 80 ? `${content.slice(0, 77)}...` : content}`;
    if (input.inlineResult)
      return { message: { uri: 'inline', bytes: 0, sha256: '0'.repeat(64) }, ok, detail, inlineMessage: message };
    // Small, the message itself travels in history (the next step's input carries it, as its transcript will), and the
    // step writes no file for it; large, it is stored (flushed) and its reference travels instead.
    return { message: await dependencies.messages.entry(message), ok, detail };
  };
}
