import {
  ApplicationFailure,
  CancellationScope,
  continueAsNew,
  getExternalWorkflowHandle,
  isCancellation,
  patched,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { agentTaskSchema, DEFAULT_MAX_STEPS } from '../../contract/agent-task';
import { FailureType } from '../../contract/failure-types';
import { resolveRunOptions } from '../../contract/run-options';
import { failed } from '../task-outcome';
import { agentActivities } from './activity-options';
import { failureWithSpend } from './child-failure';
import { agentSpendSignal } from './messages';
import { addSpend, budgetReached, emptySpend, minimum, spendOf, type AgentBudgets } from './spend';
import { runToolCall, type ToolCallContext } from './tool-calls';
import { AgentTracker } from './tracker';
import {
  AgentFailureType,
  DEFAULT_MAX_AGENT_DEPTH,
  DEFAULT_STEPS_PER_RUN,
  type AgentInput,
  type AgentOutcome,
  type AgentState,
} from './types';

/** Structured answers sent back for repair when the task says nothing. */
const DEFAULT_OUTPUT_REPAIRS = 2;

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
  const { agentStep, toolCall } = agentActivities(options);
  const tracker = new AgentTracker(task, depth, state, selfId);

  const budgets: AgentBudgets = {
    maxSteps,
    tokenLimit: minimum(task.tokenBudget, input.sharedBudget?.tokens),
    costLimit: minimum(task.costBudgetUsd, input.sharedBudget?.costUsd),
  };
  const describe = (now: string) =>
    setCurrentDetails(
      `agent ${task.name ?? task.id}: ${now}\n\n${state.steps} steps, ${state.toolCalls} tool calls, ${state.usage.totalTokens} tokens, $${state.costUsd}`,
    );
  // A cancelled sub-agent's spend is this agent's too (a failed one's comes with its failure).
  setHandler(agentSpendSignal, ({ spend }) => addSpend(state, spend));
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

  const toolCalls: ToolCallContext = {
    task,
    input,
    depth,
    maxDepth,
    selfId,
    state,
    budgets,
    tracker,
    toolCall,
    describe,
    agentWorkflow: agent,
  };

  /** Tells the workflow that started this agent what it spent, before it ends cancelled (agentSpendSignal). */
  const reportCancelledSpend = async (): Promise<void> => {
    const parent = workflowInfo().parent;
    const spentAny = state.usage.totalTokens > 0 || state.costUsd > 0 || state.unpricedSteps > 0;
    if (parent === undefined || !spentAny || !patched('failed-agent-spend')) return;
    const spend = spendOf(state);
    // The parent may have ended already (terminated): then nobody is left to count it.
    await CancellationScope.nonCancellable(() =>
      getExternalWorkflowHandle(parent.workflowId).signal(agentSpendSignal, { workflowId: selfId, spend }),
    ).catch(() => undefined);
  };

  /** The loop itself; a failure leaves it with the spend so far attached (failureWithSpend). */
  const loop = async (): Promise<AgentOutcome> => {
    let stepsThisRun = 0;
    for (;;) {
      const spent = budgetReached(state, budgets);
      if (spent) {
        tracker.emit('stopped', state.steps, spent.message);
        describe(`stopped: ${spent.message}`);
        const kept = state.transcript ? `; its transcript so far is kept at ${state.transcript.uri}` : '';
        return outcome('stopped', {
          stoppedBy: spent.reason,
          message: `agent "${task.id}" stopped after ${state.steps} steps: ${spent.message}${kept}`,
        });
      }
      if (stepsThisRun >= stepsPerRun || workflowInfo().continueAsNewSuggested) {
        tracker.emit('continued', state.steps, 'continuing as new');
        await continueAsNew<typeof agent>({ ...input, state: { ...state, eventSeq: tracker.eventSeq } });
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
      addSpend(state, result);
      tracker.emit(
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
        tracker.emit('repair', step, result.answer.invalid);
        continue;
      }
      if (result.answer) {
        tracker.emit(
          'answer',
          step,
          result.answer.output === undefined ? 'answer stored' : result.answer.output.slice(0, 120),
        );
        describe('answered');
        return outcome('ok', {
          ...(result.answer.output === undefined ? {} : { output: result.answer.output }),
          ...(result.answer.outputRef === undefined ? {} : { outputRef: result.answer.outputRef }),
          finishReason: result.finishReason,
        });
      }
      describe(`step ${step}: ${result.toolCalls.map((call) => call.summary).join(', ')}`);
      const done = await Promise.all(
        result.toolCalls.map((call, index) => runToolCall(toolCalls, result, call, index, step)),
      );
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
    throw failureWithSpend(error, { type, message, attempts: described.attempts }, spendOf(state));
  }
}
