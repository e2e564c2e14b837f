/**
 * Workflow interceptors of the traced workflow bundle (dist/workflow-bundle-traced.js, which a worker loads only when
 * tracing is on): the SDK's OpenTelemetry interceptors (a span per workflow run, activity and child start, the trace
 * context carried in Temporal headers, spans handed to the worker through its `exporter` sink, and none sent again
 * while a run replays), plus fanout's GenAI spans of workflow code: `invoke_agent {id}` around each agent run and
 * `execute_tool spawn_agents` around the sub-agents one call spawns, so they nest under it.
 *
 * This file runs in Temporal's workflow sandbox: it imports no Node module and nothing with I/O.
 */
import * as otel from '@opentelemetry/api';
import { ApplicationFailureCategory, type Payload } from '@temporalio/common';
import {
  extractContextFromHeaders,
  headersWithContext,
  TRACE_HEADER,
  UPDATE_ID_ATTR_KEY,
} from '@temporalio/interceptors-opentelemetry/lib/instrumentation';
import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
  SPAN_DELIMITER,
  SpanName,
} from '@temporalio/interceptors-opentelemetry/lib/workflow';
import {
  ApplicationFailure,
  ContinueAsNew,
  workflowInfo,
  type ActivityInput,
  type ContinueAsNewInput,
  type LocalActivityInput,
  type Next,
  type QueryInput,
  type SignalInput,
  type SignalWorkflowInput,
  type StartChildWorkflowExecutionInput,
  type UpdateInput,
  type WorkflowExecuteInput,
  type WorkflowInboundCallsInterceptor,
  type WorkflowInterceptors,
  type WorkflowOutboundCallsInterceptor,
} from '@temporalio/workflow';
import type { AgentInput, AgentOutcome } from '../contract/agent-loop';

const TRACER_NAME = 'temporal-fanout';
/** The workflow type of a batch's windows. */
const BATCH_WINDOW_WORKFLOW = 'batchWindow';
/** The workflow type agents (and sub-agents) run as. */
const AGENT_WORKFLOW = 'agent';
/** A sub-agent's workflow id: `<parent>/sub-<step>-<call>-<position>` (src/workflows/agent/tool-calls.ts). */
const SUB_AGENT_ID = /^(.*\/sub-\d+-\d+)-\d+$/;

function tracer(): otel.Tracer {
  return otel.trace.getTracer(TRACER_NAME);
}

/*
 * Why every interceptor here hands back the very promise its `next` returned, never one of its own.
 *
 * The SDK's interceptors wrap each call in `async` functions and `await`s (and, on a history recorded without tracing,
 * an extra `await Promise.resolve()` each), so with them a signal's, a child's start's or a run's promise settles a few
 * microtasks later than without. Workflow code that runs two promise chains in one workflow task (a batch ending one
 * window while it starts the next) can then take the other branch and send other commands: a worker with tracing on
 * could not carry on a batch a worker without it had started (test/replay.test.ts replays every saved history on the
 * traced bundle), nor the other way round. So each span here is opened before `next` is called, made the active
 * context while it runs, and ended by a reaction on its promise: workflow code awaits the same promise, settled at the
 * same moment, as with no interceptor at all.
 */

/** Ends `span` once `settled` settles, with the status the SDK's interceptors give; hands back `settled` itself. */
function endWhenSettled<T>(span: otel.Span, settled: Promise<T>, acceptable?: (error: unknown) => boolean): Promise<T> {
  settled.then(
    () => {
      span.setStatus({ code: otel.SpanStatusCode.OK });
      span.end();
    },
    (error: unknown) => {
      markFailed(span, error, acceptable);
      span.end();
    },
  );
  return settled;
}

/** The SDK's error status: an error it may end with (a continue-as-new) is OK, a benign failure leaves it unset. */
function markFailed(span: otel.Span, error: unknown, acceptable?: (error: unknown) => boolean): void {
  if (acceptable?.(error)) {
    span.setStatus({ code: otel.SpanStatusCode.OK });
    return;
  }
  const benign = error instanceof ApplicationFailure && error.category === ApplicationFailureCategory.BENIGN;
  const message =
    typeof (error as { message?: unknown })?.message === 'string' ? (error as Error).message : String(error);
  span.setStatus({ code: benign ? otel.SpanStatusCode.UNSET : otel.SpanStatusCode.ERROR, message });
  span.recordException(error as Error);
}

/**
 * Runs `call` with `span` as the active context (in `parent`), and ends the span when the promise it returns settles
 * (or at once if it throws). Returns that promise itself.
 */
function inSpan<T>(
  span: otel.Span,
  parent: otel.Context,
  call: () => Promise<T>,
  acceptable?: (error: unknown) => boolean,
): Promise<T> {
  let settled: Promise<T>;
  try {
    settled = otel.context.with(otel.trace.setSpan(parent, span), call);
  } catch (error) {
    markFailed(span, error, acceptable);
    span.end();
    throw error;
  }
  return endWhenSettled(span, settled, acceptable);
}

const isContinueAsNew = (error: unknown) => error instanceof ContinueAsNew;

/** `invoke_agent {id}` around an agent's run: its model, and at its end its tokens, cost and status. */
class AgentSpanInbound implements WorkflowInboundCallsInterceptor {
  execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    const info = workflowInfo();
    if (info.workflowType !== AGENT_WORKFLOW) return next(input);
    const agent = (input.args[0] ?? {}) as Partial<AgentInput>;
    const id = agent.task?.id ?? agent.item?.id ?? info.workflowId;
    const span = tracer().startSpan(`invoke_agent ${id}`, {
      kind: otel.SpanKind.INTERNAL,
      attributes: {
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.agent.id': id,
        ...(agent.task?.name === undefined ? {} : { 'gen_ai.agent.name': agent.task.name }),
        ...(agent.task?.model === undefined ? {} : { 'gen_ai.request.model': agent.task.model }),
        'fanout.task_id': id,
        'fanout.run_id': info.workflowId,
        'fanout.agent.depth': agent.depth ?? 0,
      },
    });
    const running = otel.context.with(otel.trace.setSpan(otel.context.active(), span), () => next(input));
    // Ended by reactions on the run's own promise, which is handed back as it is (see endWhenSettled).
    running.then(
      (result) => {
        const outcome = result as AgentOutcome | undefined;
        if (outcome) {
          span.setAttributes({
            'gen_ai.usage.input_tokens': outcome.usage.promptTokens,
            'gen_ai.usage.output_tokens': outcome.usage.completionTokens,
            'fanout.cost_usd': outcome.costUsd,
            'fanout.agent.steps': outcome.steps,
            'fanout.agent.tool_calls': outcome.toolCalls,
            'fanout.agent.status': outcome.status,
            ...(outcome.model === undefined ? {} : { 'gen_ai.response.model': outcome.model }),
          });
          if (outcome.status === 'stopped') {
            span.setAttribute('error.type', outcome.stoppedBy ?? 'stopped');
            span.setStatus({ code: otel.SpanStatusCode.ERROR, message: outcome.message ?? 'stopped' });
          }
        }
        span.end();
      },
      (error: unknown) => {
        if (!(error instanceof ContinueAsNew)) {
          const type = (error as { type?: unknown; name?: unknown }).type ?? (error as { name?: unknown }).name;
          span.setAttribute('error.type', typeof type === 'string' ? type : '_OTHER');
          span.setStatus({ code: otel.SpanStatusCode.ERROR, message: (error as Error).message });
        }
        span.end();
      },
    );
    return running;
  }
}

/**
 * `execute_tool spawn_agents` around the sub-agents of one `spawn_agents` call: their start spans (and with them the
 * sub-agents' whole traces) become its children. The sub-agents of a call are started together, so the span ends
 * when the last of them has ended.
 */
class SpawnSpanOutbound implements WorkflowOutboundCallsInterceptor {
  private readonly open = new Map<string, { span: otel.Span; running: number }>();

  startChildWorkflowExecution(
    input: StartChildWorkflowExecutionInput,
    next: Next<WorkflowOutboundCallsInterceptor, 'startChildWorkflowExecution'>,
  ): Promise<[Promise<string>, Promise<unknown>]> {
    const call = input.workflowType === AGENT_WORKFLOW ? SUB_AGENT_ID.exec(input.options.workflowId ?? '') : null;
    if (!call) return next(input);
    let spawn = this.open.get(call[1]);
    if (!spawn) {
      spawn = {
        span: tracer().startSpan('execute_tool spawn_agents', {
          kind: otel.SpanKind.INTERNAL,
          attributes: {
            'gen_ai.operation.name': 'execute_tool',
            'gen_ai.tool.name': 'spawn_agents',
            'gen_ai.tool.type': 'function',
            'fanout.run_id': workflowInfo().workflowId,
          },
        }),
        running: 0,
      };
      this.open.set(call[1], spawn);
    }
    const current = spawn;
    current.running += 1;
    const ended = () => {
      current.running -= 1;
      if (current.running > 0) return;
      current.span.end();
      this.open.delete(call[1]);
    };
    let starting: Promise<[Promise<string>, Promise<unknown>]>;
    try {
      starting = otel.context.with(otel.trace.setSpan(otel.context.active(), current.span), () => next(input));
    } catch (error) {
      ended();
      throw error;
    }
    // The start's own promise, handed back as it is (see endWhenSettled); the span ends with the last sub-agent.
    starting.then(([, result]) => result.then(ended, ended), ended);
    return starting;
  }
}

/**
 * The SDK's inbound interceptor, each span ended by a reaction on the promise workflow code settles (see
 * endWhenSettled), and without its `HandleQuery:<name>` span per query. Every look of a watch (`fanout status --watch`,
 * `batch status --watch`, an agent's view of its sub-agents) queries each run, window or agent it shows, and each
 * query's span was made in the sandbox and handed out through the sink, on the workflow thread the run's own work
 * needs, for a span that says only that someone looked. A query makes no command, so leaving its span out changes
 * nothing a run does or replays. The run's span and each signal's and update's span keep the SDK's names.
 */
class TransparentInbound extends OpenTelemetryInboundInterceptor {
  override execute(
    input: WorkflowExecuteInput,
    next: Next<WorkflowInboundCallsInterceptor, 'execute'>,
  ): Promise<unknown> {
    const parent = extractContextFromHeaders(input.headers) ?? otel.context.active();
    const name = `${SpanName.WORKFLOW_EXECUTE}${SPAN_DELIMITER}${workflowInfo().workflowType}`;
    return inSpan(this.tracer.startSpan(name, {}, parent), parent, () => next(input), isContinueAsNew);
  }

  override handleSignal(
    input: SignalInput,
    next: Next<WorkflowInboundCallsInterceptor, 'handleSignal'>,
  ): Promise<void> {
    const parent = extractContextFromHeaders(input.headers) ?? otel.context.active();
    const name = `${SpanName.WORKFLOW_HANDLE_SIGNAL}${SPAN_DELIMITER}${input.signalName}`;
    return inSpan(this.tracer.startSpan(name, {}, parent), parent, () => next(input));
  }

  override handleUpdate(
    input: UpdateInput,
    next: Next<WorkflowInboundCallsInterceptor, 'handleUpdate'>,
  ): Promise<unknown> {
    const parent = extractContextFromHeaders(input.headers) ?? otel.context.active();
    const name = `${SpanName.WORKFLOW_HANDLE_UPDATE}${SPAN_DELIMITER}${input.name}`;
    const span = this.tracer.startSpan(name, { attributes: { [UPDATE_ID_ATTR_KEY]: input.updateId } }, parent);
    return inSpan(span, parent, () => next(input));
  }

  override handleQuery(
    input: QueryInput,
    next: Next<WorkflowInboundCallsInterceptor, 'handleQuery'>,
  ): Promise<unknown> {
    return next(input);
  }
}

/**
 * The SDK's outbound interceptor, each span ended by a reaction on the promise workflow code settles (see
 * endWhenSettled), with a leaner `scheduleActivity`: the same `StartActivity:<type>` span, open while the
 * activity runs, and the same header, with one promise instead of the SDK's four or five. The sandbox captures (and
 * source-maps) a stack for every promise workflow code creates, and a batch window schedules an activity per lane:
 * bench/tracing.ts measured the SDK's version at most of tracing's CPU in the workflow thread.
 */
class LeanOutbound extends OpenTelemetryOutboundInterceptor {
  /**
   * A window's trace header, made once per context: every lane of a window is scheduled in the window's run context,
   * so the header (the context injected, then encoded as a payload) is the same for all of them.
   */
  private windowHeader?: { context: otel.Context; payload: Payload };

  override scheduleActivity(
    input: ActivityInput,
    next: Next<WorkflowOutboundCallsInterceptor, 'scheduleActivity'>,
  ): Promise<unknown> {
    // A batch window schedules an activity per lane, thousands in a long batch: its lanes' RunActivity spans go
    // straight under the window's run span, without a StartActivity span each (its end alone costs the sandbox's span
    // processor several promises).
    if (workflowInfo().workflowType === BATCH_WINDOW_WORKFLOW) {
      const context = otel.context.active();
      if (this.windowHeader?.context !== context)
        this.windowHeader = { context, payload: headersWithContext({})[TRACE_HEADER] };
      return next({ ...input, headers: { ...input.headers, [TRACE_HEADER]: this.windowHeader.payload } });
    }
    const span = this.tracer.startSpan(`StartActivity:${input.activityType}`, { kind: otel.SpanKind.INTERNAL });
    const headers = otel.context.with(otel.trace.setSpan(otel.context.active(), span), () =>
      headersWithContext(input.headers),
    );
    const result = next({ ...input, headers });
    result.then(
      () => {
        span.setStatus({ code: otel.SpanStatusCode.OK });
        span.end();
      },
      (error: unknown) => {
        span.setStatus({ code: otel.SpanStatusCode.ERROR, message: (error as Error)?.message });
        span.end();
      },
    );
    return result;
  }
  override scheduleLocalActivity(
    input: LocalActivityInput,
    next: Next<WorkflowOutboundCallsInterceptor, 'scheduleLocalActivity'>,
  ): Promise<unknown> {
    return this.withHeader(`${SpanName.ACTIVITY_START}${SPAN_DELIMITER}${input.activityType}`, input, next);
  }

  override startChildWorkflowExecution(
    input: StartChildWorkflowExecutionInput,
    next: Next<WorkflowOutboundCallsInterceptor, 'startChildWorkflowExecution'>,
  ): Promise<[Promise<string>, Promise<unknown>]> {
    return this.withHeader(`${SpanName.CHILD_WORKFLOW_START}${SPAN_DELIMITER}${input.workflowType}`, input, next);
  }

  override signalWorkflow(
    input: SignalWorkflowInput,
    next: Next<WorkflowOutboundCallsInterceptor, 'signalWorkflow'>,
  ): Promise<void> {
    return this.withHeader(`${SpanName.WORKFLOW_SIGNAL}${SPAN_DELIMITER}${input.signalName}`, input, next);
  }

  override continueAsNew(
    input: ContinueAsNewInput,
    next: Next<WorkflowOutboundCallsInterceptor, 'continueAsNew'>,
  ): Promise<never> {
    const name = `${SpanName.CONTINUE_AS_NEW}${SPAN_DELIMITER}${input.options.workflowType}`;
    return this.withHeader(name, input, next, isContinueAsNew);
  }

  /** `next` called with the trace header of a span named `name`, open (and the active context) until it settles. */
  private withHeader<I extends { headers: Record<string, Payload> }, T>(
    name: string,
    input: I,
    next: (input: I) => Promise<T>,
    acceptable?: (error: unknown) => boolean,
  ): Promise<T> {
    const parent = otel.context.active();
    const span = this.tracer.startSpan(name, {}, parent);
    return inSpan(span, parent, () => next({ ...input, headers: headersWithContext(input.headers) }), acceptable);
  }
}

export const interceptors = (): WorkflowInterceptors => ({
  // The SDK's first: its run span (with the caller's context from the headers) is the parent of invoke_agent.
  inbound: [new TransparentInbound(), new AgentSpanInbound()],
  // Ours first: the SDK's child-start span opens inside the spawn span.
  outbound: [new SpawnSpanOutbound(), new LeanOutbound()],
  internals: [new OpenTelemetryInternalsInterceptor()],
});
