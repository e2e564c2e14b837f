import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { PayloadStore } from '../../store';
import type { ToolRegistry } from '../../tools/registry';
import { ToolInputError } from '../../tools/define-tool';
import { McpServerUnavailableError } from '../../tools/mcp';
import { FailureType } from '../../contract/failure-types';
import { AgentFailureType, type ToolCallInput, type ToolCallResult } from '../../contract/agent-loop';
import { storageFailure } from '../model-call';
import { deadlineSignal, watchForCancellation } from '../../llm/cancellation';
import type { ChatMessage, MessageStore } from './message-store';
import { inToolSpan } from '../../telemetry/genai-spans';

export interface ToolCallDependencies {
  store: PayloadStore;
  tools: ToolRegistry;
  messages: MessageStore;
}

interface FunctionCall {
  id: string;
  function: { name: string; arguments: string };
}

/** The result text of a finished `spawn_agents` call: each sub-agent's answer (or why it has none), in task order. */
async function spawnedResult(input: ToolCallInput, store: PayloadStore): Promise<string> {
  const agents = await Promise.all(
    (input.spawned ?? []).map(async (agent) => {
      let output = agent.output;
      if (output === undefined && agent.outputRef) {
        try {
          output = await store.get(agent.outputRef);
        } catch (error) {
          return storageFailure(error, `reading the answer of sub-agent ${agent.id}`);
        }
      }
      return {
        id: agent.id,
        status: agent.status,
        ...(output === undefined ? {} : { output }),
        ...(agent.error === undefined ? {} : { error: agent.error }),
      };
    }),
  );
  return JSON.stringify(agents);
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
 * One tool call of an agent step: runs the tool the model asked for (a registered function or an MCP tool), aborted by
 * cancellation or the tool's timeout, and stores the result as the `tool` message the model reads next. A tool's failure
 * is its result (`error: …`), as providers expect, not a failure of the activity; only the store's failures are, and
 * an MCP server that cannot be reached (ToolUnavailable, retried on a new connection).
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
      const assistant = await dependencies.messages.getMessage(input.assistant);
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
    let content: string;
    let ok = false;
    if (input.denied !== undefined) content = `denied: ${input.denied}`;
    else if (input.invalid !== undefined) content = `error: ${input.invalid}`;
    else if (input.spawned !== undefined) {
      content = await spawnedResult(input, dependencies.store);
      ok = input.spawned.every((agent) => agent.status === 'ok');
    } else {
      const name = call.function.name;
      const tool = await dependencies.tools.resolve([name]).then(
        ({ tools }) => tools[0],
        (error: unknown) => {
          failIfUnavailable(error, input, name, context.info.attempt);
          throw error;
        },
      );
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
        content = await inToolSpan({ ...span, mcpServer: tool.mcpServer }, () => tool.call(parsed, toolContext));
        ok = true;
      } catch (error) {
        // Cancellation is the agent's, not the tool's: it must surface as the SDK's CancelledFailure.
        if (context.cancellationSignal.aborted) throw context.cancellationSignal.reason;
        if (cutOff.signal.aborted) throw cutOff.signal.reason;
        failIfUnavailable(error, input, name, context.info.attempt);
        const message = deadline.timedOut()
          ? `the tool ran past its ${tool?.timeoutMs} ms timeout`
          : error instanceof SyntaxError
            ? `the arguments are not JSON (${error.message})`
            : error instanceof ToolInputError || error instanceof Error
              ? error.message
              : String(error);
        content = `error: ${message}`;
      } finally {
        deadline.clear();
        stopWatching();
      }
    }
    const message: ChatMessage = { role: 'tool', tool_call_id: call.id, content };
    const detail = `${ok ? 'ok' : 'failed'}: ${content.length > 80 ? `${content.slice(0, 77)}...` : content}`;
    if (input.inlineResult)
      return { message: { uri: 'inline', bytes: 0, sha256: '0'.repeat(64) }, ok, detail, inlineMessage: message };
    return { message: await dependencies.messages.putMessage(message), ok, detail };
  };
}
