import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  ChildWorkflowCancellationType,
  ParentClosePolicy,
  condition,
  continueAsNew,
  executeChild,
  getExternalWorkflowHandle,
  isCancellation,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../../activities';
import { agentTaskSchema, DEFAULT_MAX_STEPS } from '../../contract/agent-task';
import { FailureType } from '../../contract/failure-types';
import { roundUsd } from '../../contract/metrics';
import { RATE_LIMIT_WAIT_MS, resolveRunOptions } from '../../contract/run-options';
import { agentProgressQuery, agentSpendSignal, approveUpdate } from './messages';
import { childFailure, failureWithSpend, spendOfFailure } from './child-failure';
import { failed } from '../task-outcome';
import {
  AgentFailureType,
  DEFAULT_MAX_AGENT_DEPTH,
  DEFAULT_STEPS_PER_RUN,
  type AgentEvent,
  type AgentInput,
  type AgentOutcome,
  type AgentState,
  type AgentStepResult,
  type AgentStopReason,
  type PendingApproval,
  type SpawnedAgent,
  type ToolCallRequest,
  type ToolCallResult,
} from './types';

/** Events an agent keeps for `fanout watch`; older ones are dropped (and counted). */
const MAX_AGENT_EVENTS = 500;
/** A tool call may run this long before Temporal times its attempt out (tools abort themselves at their own timeout). */
const TOOL_CALL_TIMEOUT_MS = 15 * 60_000;
/** Structured answers sent back for repair when the task says nothing. */
const DEFAULT_OUTPUT_REPAIRS = 2;

const emptySpend = () => ({
  steps: 0,
  toolCalls: 0,
  usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
  costUsd: 0,
  unpricedSteps: 0,
});

/**
 * A durable agent: model steps (`agentStep`) and the tool calls each asks for (`toolCall`, concurrently, results in the
 * order asked) until the model answers, a budget is spent, or the run is cancelled. Messages live in the payload store;
 * history carries one transcript reference per step. Sub-agents (`spawn_agents`) are child workflows; tools marked
 * `needsApproval` wait for the `approve` update (no activity, no slot) or deny themselves at their timeout.
 */
export async function agent(input: AgentInput): Promise<AgentOutcome> {
  const parsedTask = agentTaskSchema.safeParse(input.task);
  if (!parsedTask.success)
    throw ApplicationFailure.create({
      type: FailureType.InvalidInput,
      message: `agent task: ${parsedTask.error.message}`,
      nonRetryable: true,
    });
  const task = parsedTask.data;
  const options = resolveRunOptions(input.options);
  const depth = input.depth ?? 0;
  const maxDepth = input.maxDepth ?? DEFAULT_MAX_AGENT_DEPTH;
  const maxSteps = task.maxSteps ?? DEFAULT_MAX_STEPS;
  const repairsAllowed = task.outputRepairs ?? DEFAULT_OUTPUT_REPAIRS;
  const stepsPerRun = input.stepsPerRun ?? DEFAULT_STEPS_PER_RUN;
  const state: AgentState = input.state ?? { ...emptySpend(), append: [], repairs: 0, startedAt: Date.now() };
  const selfId = workflowInfo().workflowId;
  const retry = {
    maximumAttempts: options.retry.maximumAttempts,
    initialInterval: options.retry.initialIntervalMs,
    backoffCoefficient: options.retry.backoffCoefficient,
    maximumInterval: options.retry.maximumIntervalMs,
  };
  // Both wait for their activity to stop when cancelled: a cancelled agent leaves no model or tool call running.
  const { agentStep } = proxyActivities<Activities>({
    startToCloseTimeout: options.agentTimeoutMs + RATE_LIMIT_WAIT_MS,
    ...(options.heartbeatTimeoutMs === undefined ? {} : { heartbeatTimeout: options.heartbeatTimeoutMs }),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry,
  });
  const { toolCall } = proxyActivities<Activities>({
    startToCloseTimeout: TOOL_CALL_TIMEOUT_MS,
    ...(options.heartbeatTimeoutMs === undefined ? {} : { heartbeatTimeout: options.heartbeatTimeoutMs }),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    // A tool's own failure is its result; what is retried here is the store, a lost worker, a timeout.
    retry: { ...retry, maximumAttempts: Math.min(retry.maximumAttempts, 3) },
  });

  const events: AgentEvent[] = [];
  let eventSeq = state.eventSeq ?? 0;
  const emit = (type: AgentEvent['type'], step: number, detail: string): void => {
    events.push({ seq: ++eventSeq, at: Date.now(), type, step, detail });
    if (events.length > MAX_AGENT_EVENTS) events.shift();
  };
  const waiting = new Map<string, PendingApproval>();
  const decisions = new Map<string, { approve: boolean; reason?: string }>();
  const children = new Set<string>();
  const finishedChildren: string[] = [];
  setHandler(agentProgressQuery, (cursor?: number) => ({
    taskId: task.id,
    depth,
    steps: state.steps,
    toolCalls: state.toolCalls,
    usage: state.usage,
    costUsd: state.costUsd,
    unpricedSteps: state.unpricedSteps,
    waiting: [...waiting.values()],
    children: [...children],
    finishedChildren: [...finishedChildren],
    events: events.filter((event) => event.seq > (cursor ?? 0)),
    dropped: eventSeq - events.length,
  }));
  setHandler(
    approveUpdate,
    (decision) => {
      decisions.set(decision.callId, {
        approve: decision.approve,
        ...(decision.reason === undefined ? {} : { reason: decision.reason }),
      });
      return { callId: decision.callId, approved: decision.approve };
    },
    {
      validator: (decision) => {
        if (!waiting.has(decision.callId)) {
          const open = [...waiting.keys()];
          throw new Error(
            `no call "${decision.callId}" waits for approval in ${selfId}${open.length > 0 ? `; waiting: ${open.join(', ')}` : ' (none waits)'}`,
          );
        }
      },
    },
  );

  const tokenLimit = minimum(task.tokenBudget, input.sharedBudget?.tokens);
  const costLimit = minimum(task.costBudgetUsd, input.sharedBudget?.costUsd);
  const budgetReached = (): { reason: AgentStopReason; message: string } | undefined => {
    if (state.steps >= maxSteps) return { reason: 'steps', message: `its step budget (${maxSteps}) is spent` };
    if (tokenLimit !== undefined && state.usage.totalTokens >= tokenLimit)
      return {
        reason: 'tokens',
        message: `its token budget (${tokenLimit}) is spent: ${state.usage.totalTokens} used`,
      };
    if (costLimit !== undefined && state.costUsd >= costLimit)
      return { reason: 'cost', message: `its cost budget ($${costLimit}) is spent: $${state.costUsd} used` };
    return undefined;
  };
  const describe = (now: string) =>
    setCurrentDetails(
      `agent ${task.name ?? task.id}: ${now}\n\n${state.steps} steps, ${state.toolCalls} tool calls, ${state.usage.totalTokens} tokens, $${state.costUsd}`,
    );
  const addSpend = (spend: { usage?: AgentOutcome['usage']; costUsd?: number; unpriced?: boolean }) => {
    state.usage = {
      promptTokens: state.usage.promptTokens + (spend.usage?.promptTokens ?? 0),
      completionTokens: state.usage.completionTokens + (spend.usage?.completionTokens ?? 0),
      totalTokens: state.usage.totalTokens + (spend.usage?.totalTokens ?? 0),
    };
    state.costUsd = roundUsd(state.costUsd + (spend.costUsd ?? 0));
    if (spend.unpriced) state.unpricedSteps += 1;
  };
  // A cancelled sub-agent's spend is this agent's too (a failed one's comes with its failure).
  setHandler(agentSpendSignal, ({ spend }) => addSpend(spend));
  const outcome = (status: AgentOutcome['status'], extra: Partial<AgentOutcome>): AgentOutcome => ({
    status,
    steps: state.steps,
    toolCalls: state.toolCalls,
    usage: state.usage,
    costUsd: state.costUsd,
    unpricedSteps: state.unpricedSteps,
    finishReason: null,
    ...(state.model === undefined ? {} : { model: state.model }),
    ...(state.unpricedSteps > 0 ? { unpriced: true } : {}),
    ...(state.transcript === undefined ? {} : { transcript: state.transcript }),
    ...extra,
  });

  /** Runs the sub-agents of a `spawn_agents` call as child workflows, sharing what is left of this agent's budgets. */
  const spawn = async (call: ToolCallRequest, step: number, index: number): Promise<SpawnedAgent[]> => {
    const tasks = call.spawn ?? [];
    const share = (limit: number | undefined, used: number) =>
      limit === undefined ? undefined : Math.max(0, (limit - used) / tasks.length);
    const tokens = share(tokenLimit, state.usage.totalTokens);
    const costUsd = share(costLimit, state.costUsd);
    emit('spawned', step, `${tasks.length} sub-agents: ${tasks.map((spawned) => spawned.id).join(', ')}`);
    return Promise.all(
      tasks.map(async (child, position): Promise<SpawnedAgent> => {
        const workflowId = `${selfId}/sub-${step}-${index + 1}-${position + 1}`;
        children.add(workflowId);
        try {
          const result = await executeChild(agent, {
            workflowId,
            args: [
              {
                task: child,
                ...(input.options === undefined ? {} : { options: input.options }),
                inlineOutputBytes: input.inlineOutputBytes,
                depth: depth + 1,
                maxDepth,
                sharedBudget: {
                  ...(tokens === undefined ? {} : { tokens: Math.floor(tokens) }),
                  ...(costUsd === undefined ? {} : { costUsd }),
                },
              },
            ],
            // The parent's scope cancels them; should the parent's run end anyway, the server asks them to cancel.
            cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
            parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
            staticSummary: `sub-agent of ${task.name ?? task.id}: ${child.prompt.slice(0, 80)}`,
          });
          addSpend({ usage: result.usage, costUsd: result.costUsd, ...(result.unpriced ? { unpriced: true } : {}) });
          return {
            id: child.id,
            status: result.status,
            ...(result.output === undefined ? {} : { output: result.output }),
            ...(result.outputRef === undefined ? {} : { outputRef: result.outputRef }),
            ...(result.message === undefined ? {} : { error: result.message }),
          };
        } catch (error) {
          const failure = childFailure(error);
          if (failure.cancelled) throw error;
          // What a failed sub-agent spent is this agent's too; a history from before it was reported has none.
          const spent = spendOfFailure(error);
          if (spent !== undefined && patched('failed-agent-spend')) addSpend(spent);
          return { id: child.id, status: 'failed', error: failure.message };
        } finally {
          children.delete(workflowId);
          finishedChildren.push(workflowId);
          if (finishedChildren.length > 100) finishedChildren.shift();
        }
      }),
    );
  };

  /** One tool call of a step, through approval when the tool needs it; resolves to its stored result. */
  const runCall = async (
    result: AgentStepResult,
    call: ToolCallRequest,
    index: number,
    step: number,
  ): Promise<ToolCallResult> => {
    const base = { taskId: task.id, step, assistant: result.assistant, index };
    let extra: { denied?: string; spawned?: SpawnedAgent[]; invalid?: string } = {};
    emit('tool-call', step, call.summary);
    if (call.invalid !== undefined) extra = { invalid: call.invalid };
    else if (call.spawn !== undefined) extra = { spawned: await spawn(call, step, index) };
    else if (call.approvalTimeoutMs !== undefined) {
      const since = Date.now();
      waiting.set(call.id, {
        callId: call.id,
        tool: call.name,
        summary: call.summary,
        step,
        since,
        deadline: since + call.approvalTimeoutMs,
      });
      emit('approval-waiting', step, `${call.id} ${call.summary}`);
      describe(`waiting for approval of ${call.summary} (fanout approve ${selfId} ${call.id})`);
      // A durable timer: the wait holds no activity slot and costs nothing while it lasts.
      const answered = await condition(() => decisions.has(call.id), call.approvalTimeoutMs);
      waiting.delete(call.id);
      const decision = decisions.get(call.id);
      if (!answered || !decision) {
        extra = { denied: `no one approved the call within ${call.approvalTimeoutMs} ms` };
        emit('denied', step, `${call.id}: approval timed out`);
      } else if (!decision.approve) {
        extra = { denied: `a person denied the call${decision.reason ? `: ${decision.reason}` : ''}` };
        emit('denied', step, `${call.id}${decision.reason ? `: ${decision.reason}` : ''}`);
      } else emit('approved', step, call.id);
    }
    const done = await toolCall.executeWithOptions(
      { activityId: `tool:${step}:${index + 1}`, summary: `step ${step}: ${call.summary}` },
      [{ ...base, ...extra }],
    );
    state.toolCalls += 1;
    emit('tool-result', step, `${call.summary} ${done.detail}`);
    return done;
  };

  /** Tells the workflow that started this agent what it spent, before it ends cancelled (agentSpendSignal). */
  const reportCancelledSpend = async (): Promise<void> => {
    const parent = workflowInfo().parent;
    const spentAny = state.usage.totalTokens > 0 || state.costUsd > 0 || state.unpricedSteps > 0;
    if (parent === undefined || !spentAny || !patched('failed-agent-spend')) return;
    const spend = {
      usage: state.usage,
      costUsd: state.costUsd,
      ...(state.unpricedSteps > 0 ? { unpriced: true } : {}),
    };
    // The parent may have ended already (terminated): then nobody is left to count it.
    await CancellationScope.nonCancellable(() =>
      getExternalWorkflowHandle(parent.workflowId).signal(agentSpendSignal, { workflowId: selfId, spend }),
    ).catch(() => undefined);
  };

  /** The loop itself; a failure leaves it with the spend so far attached (failureWithSpend). */
  const loop = async (): Promise<AgentOutcome> => {
    let stepsThisRun = 0;
    for (;;) {
      const spent = budgetReached();
      if (spent) {
        emit('stopped', state.steps, spent.message);
        describe(`stopped: ${spent.message}`);
        const kept = state.transcript ? `; its transcript so far is kept at ${state.transcript.uri}` : '';
        return outcome('stopped', {
          stoppedBy: spent.reason,
          message: `agent "${task.id}" stopped after ${state.steps} steps: ${spent.message}${kept}`,
        });
      }
      if (stepsThisRun >= stepsPerRun || workflowInfo().continueAsNewSuggested) {
        emit('continued', state.steps, 'continuing as new');
        await continueAsNew<typeof agent>({ ...input, state: { ...state, eventSeq } });
      }
      state.steps += 1;
      stepsThisRun += 1;
      const step = state.steps;
      describe(`step ${step}`);
      const result = await agentStep.executeWithOptions({ activityId: `step:${step}`, summary: `step ${step}` }, [
        {
          task,
          step,
          ...(state.transcript === undefined ? {} : { transcript: state.transcript }),
          append: state.append,
          ...(state.note === undefined ? {} : { note: state.note }),
          ...(state.transcript === undefined && input.dependencies ? { dependencies: input.dependencies } : {}),
          ...(state.transcript === undefined && input.synthesis ? { synthesis: input.synthesis } : {}),
          canSpawn: depth < maxDepth,
          inlineOutputBytes: input.inlineOutputBytes,
          ...(input.storeOutput ? { storeOutput: true } : {}),
        },
      ]);
      state.transcript = result.transcript;
      state.append = [];
      state.note = undefined;
      state.model = result.model;
      addSpend(result);
      emit(
        'step',
        step,
        result.answer
          ? 'answered'
          : `${result.toolCalls.length} tool calls: ${result.toolCalls.map((call) => call.summary).join(', ')}`,
      );
      if (result.answer?.invalid !== undefined) {
        if (state.repairs >= repairsAllowed) {
          throw ApplicationFailure.create({
            type: AgentFailureType.OutputInvalid,
            message: `agent "${task.id}": the answer still did not match its output schema after ${state.repairs} repairs: ${result.answer.invalid}`,
            nonRetryable: true,
          });
        }
        state.repairs += 1;
        state.note = `Your answer was not accepted: ${result.answer.invalid}. Answer again with JSON only that matches the schema.`;
        emit('repair', step, result.answer.invalid);
        continue;
      }
      if (result.answer) {
        emit('answer', step, result.answer.output === undefined ? 'answer stored' : result.answer.output.slice(0, 120));
        describe('answered');
        return outcome('ok', {
          ...(result.answer.output === undefined ? {} : { output: result.answer.output }),
          ...(result.answer.outputRef === undefined ? {} : { outputRef: result.answer.outputRef }),
          finishReason: result.finishReason,
        });
      }
      describe(`step ${step}: ${result.toolCalls.map((call) => call.summary).join(', ')}`);
      const done = await Promise.all(result.toolCalls.map((call, index) => runCall(result, call, index, step)));
      state.append = done.map((call) => call.message);
    }
  };

  try {
    return await loop();
  } catch (error) {
    if (isCancellation(error)) {
      await reportCancelledSpend();
      throw error;
    }
    const described = failed(task, error, 0, options.retry.maximumAttempts);
    const { type, message } = described.error ?? { type: FailureType.Unknown, message: String(error) };
    throw failureWithSpend(
      error,
      { type, message, attempts: described.attempts },
      {
        usage: state.usage,
        costUsd: state.costUsd,
        ...(state.unpricedSteps > 0 ? { unpriced: true } : {}),
      },
    );
  }
}

function minimum(first: number | undefined, second: number | undefined): number | undefined {
  if (first === undefined) return second;
  if (second === undefined) return first;
  return Math.min(first, second);
}
