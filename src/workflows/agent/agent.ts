import {
  ApplicationFailure,
  CancelledFailure,
  CancellationScope,
  continueAsNew,
  getExternalWorkflowHandle,
  isCancellation,
  setCurrentDetails,
  setHandler,
  TemporalFailure,
  workflowInfo,
} from '@temporalio/workflow';
import type * as AgentTaskSchemas from '../../contract/agent-task';
import type { AgentTask } from '../../contract/agent-task';
import { DEFAULT_MAX_STEPS, withCallDefaults } from '../../contract/agent-task-rules';
import { FailureType } from '../../contract/failure-types';
import { resolveRunOptions } from '../../contract/run-option-defaults';
import { failed } from '../task-outcome';
import { agentLoopActivities, placeActivities } from './activity-options';
import { failureWithSpend } from './child-failure';
import { agentSpendSignal } from './messages';
import { addSpend, budgetReached, emptySpend, minimum, spendOf, spendSince, type AgentBudgets } from './spend';
import { runToolCall, withheldTools, type ToolCallContext } from './tool-calls';
import { AgentTracker } from './tracker';
import {
  AgentFailureType,
  DEFAULT_MAX_AGENT_DEPTH,
  DEFAULT_STEPS_PER_RUN,
  type AgentInput,
  type AgentOutcome,
  type AgentState,
  type PendingStep,
  type SavedPlace,
  type ToolCallResult,
} from '../../contract/agent-loop';

/** Structured answers sent back for repair when the task says nothing. */
const DEFAULT_OUTPUT_REPAIRS = 2;

/**
 * The task, validated (input may come from any Temporal client). The schema is loaded here, not at the top: a workflow's
 * modules are loaded afresh for every run, and agents started by fanout's workflows come validated (`taskValidated`).
 */
function validTask(task: unknown): AgentTask {
  const { agentTaskSchema } = require('../../contract/agent-task') as typeof AgentTaskSchemas;
  const parsed = agentTaskSchema.safeParse(task);
  if (parsed.success) return parsed.data;
  throw ApplicationFailure.create({
    type: FailureType.InvalidInput,
    message: `agent task: ${parsed.error.message}`,
    nonRetryable: true,
  });
}

/**
 * A durable agent: model steps (`agentStep`) and the tool calls each asks for (`toolCall`, concurrently, results in the
 * order asked) until the model answers, a budget is spent, or the run is cancelled. Messages live in the payload store;
 * history carries one transcript reference per step. Sub-agents (`spawn_agents`) are child workflows; tools marked
 * `needsApproval` wait for the `approve` update (no activity, no slot) or deny themselves at their timeout.
 */
export async function agent(given: AgentInput): Promise<AgentOutcome> {
  // An agent of a batch reads its task and, when a run before this one saved it, its place (SavedPlace): an agent that
  // answered then returns that answer, one that stopped goes on from where it was.
  const { loadAgentPlace, saveAgentPlace } = placeActivities();
  const place = given.place;
  const loaded =
    place !== undefined && given.state === undefined
      ? await loadAgentPlace({ place, ...(given.item ? { item: given.item } : { task: given.task }) })
      : undefined;
  // An answer saved before: whoever started the agent then counted its spend when it came (a parent agent's saved state
  // holds it), so all of it is `before`.
  const answeredBefore = loaded?.saved?.outcome;
  if (answeredBefore)
    return { ...answeredBefore, before: { usage: answeredBefore.usage, costUsd: answeredBefore.costUsd } };
  // A saved state's spend was counted by the runs that spent it: this run's budgets and reports count only the rest.
  const resumed = loaded?.saved?.state;
  if (resumed) resumed.before = { usage: resumed.usage, costUsd: resumed.costUsd };
  const checkedTask = given.taskValidated && given.task ? given.task : validTask(given.task ?? loaded?.task);
  // The run's answer cache (a batch's agents get it in their options) on a task that sets none: each step reads it there.
  const cache = given.options?.cache;
  const defaulted = withCallDefaults(checkedTask, given.options ?? {});
  const task = cache && cache.mode !== 'off' && !defaulted.cache ? { ...defaulted, cache } : defaulted;
  // From its second step on the transcript holds the prompt: a step gets the task's settings only, so a long prompt is
  // not carried into history again at every step.
  const { system: _system, contentRef: _contentRef, ...settings } = task;
  const laterStepTask: AgentTask = { ...settings, prompt: '' };
  const input: AgentInput = {
    ...given,
    task,
    ...(resumed ? { state: resumed } : {}),
    ...(loaded ? { placeFingerprint: loaded.fingerprint } : {}),
  };
  const options = resolveRunOptions(input.options);
  const depth = input.depth ?? 0;
  const maxDepth = input.maxDepth ?? DEFAULT_MAX_AGENT_DEPTH;
  const maxSteps = task.maxSteps ?? DEFAULT_MAX_STEPS;
  const repairsAllowed = task.outputRepairs ?? DEFAULT_OUTPUT_REPAIRS;
  const stepsPerRun = input.stepsPerRun ?? DEFAULT_STEPS_PER_RUN;
  const state: AgentState = input.state ?? { ...emptySpend(), append: [], repairs: 0, startedAt: Date.now() };
  const selfId = workflowInfo().workflowId;
  const { agentStep, toolCall } = agentLoopActivities(options);
  const tracker = new AgentTracker(task, depth, state, selfId);
  for (const [callId, decision] of Object.entries(state.pending?.decisions ?? {}))
    tracker.decisions.set(callId, decision);

  // The agent's own budgets count all it spent; what it shares (its batch's, its parent's) only what it spent this run.
  const before = state.before;
  const offset = (limit: number | undefined, spent: number) => (limit === undefined ? undefined : limit + spent);
  const budgets: AgentBudgets = {
    maxSteps,
    tokenLimit: minimum(task.tokenBudget, offset(input.sharedBudget?.tokens, before?.usage.totalTokens ?? 0)),
    costLimit: minimum(task.costBudgetUsd, offset(input.sharedBudget?.costUsd, before?.costUsd ?? 0)),
  };
  const describe = (now: string) =>
    setCurrentDetails(
      `agent ${task.name ?? task.id}: ${now}\n\n${state.steps} steps, ${state.toolCalls} tool calls, ${state.usage.totalTokens} tokens, $${state.costUsd}`,
    );
  // A cancelled sub-agent's spend (this run's) is this agent's too (a failed one's comes with its failure).
  setHandler(agentSpendSignal, ({ spend }) => addSpend(state, spend));
  const outcome = (status: AgentOutcome['status'], extra: Partial<AgentOutcome>): AgentOutcome => ({
    status,
    steps: state.steps,
    toolCalls: state.toolCalls,
    usage: state.usage,
    costUsd: state.costUsd,
    unpricedSteps: state.unpricedSteps,
    ...(state.cacheSavingsUsd === undefined ? {} : { cacheSavingsUsd: state.cacheSavingsUsd }),
    finishReason: null,
    ...(state.model === undefined ? {} : { model: state.model }),
    ...(state.unpricedSteps > 0 ? { unpriced: true } : {}),
    ...(state.transcript === undefined ? {} : { transcript: state.transcript }),
    ...(before === undefined ? {} : { before }),
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
    if (parent === undefined || !spentAny) return;
    const { before: _counted, ...spend } = spendSince(spendOf(state), before);
    // The parent may have ended already (terminated): then nobody is left to count it.
    await CancellationScope.nonCancellable(() =>
      getExternalWorkflowHandle(parent.workflowId).signal(agentSpendSignal, { workflowId: selfId, spend }),
    ).catch(() => undefined);
  };

  /** True while a model step is out (its number already counted in `state.steps`). */
  let stepInFlight = false;
  /**
   * The scope every step's tool calls run in, made at the first: a scope per step stayed in memory until the run ended
   * (the SDK hangs each on its parent's cancellation, and the call-notices interceptor listens on each), the larger part
   * of the 5 KB a step a cached agent was measured to grow by. Cancelled only when a call failed; the agent then ends.
   */
  let toolScope: CancellationScope | undefined;

  /**
   * A step's tool calls, concurrently, their results in the order asked. The step stays in the state (`pending`) while
   * they run, each result kept as it comes, so a place saved meanwhile resumes with only the calls that had none.
   */
  const runTools = async (pending: PendingStep): Promise<void> => {
    state.pending = pending;
    describe(`step ${pending.step}: ${pending.result.calls.map((call) => call.summary).join(', ')}`);
    // Every call ends before a failure is thrown (cancelled, a call still answering keeps its result, and an agent with
    // a place saves it after). A call that fails (not cancelled) cancels the others, whose answers so far are kept.
    // Promise chains in one scope entry, not an async function and a scope entry per call: every promise a workflow
    // makes costs a stack capture in the SDK's sandbox (see TaskRun.runTask). Each call starts (and schedules its
    // activity) synchronously, in the order asked, as before.
    const calls = (toolScope ??= new CancellationScope());
    const ended = await calls.run(() =>
      Promise.allSettled(
        pending.result.calls.map((call, index) => {
          const done = pending.done[index];
          if (done) return done;
          return runToolCall(toolCalls, pending.result, call, index, pending.step).then(
            (result) => (pending.done[index] = result),
            (error: unknown) => {
              if (!isCancellation(error)) calls.cancel();
              throw error;
            },
          );
        }),
      ),
    );
    const failures = ended.flatMap((end) => (end.status === 'rejected' ? [end.reason as unknown] : []));
    const cancelled = CancellationScope.current().consideredCancelled;
    if (failures.length > 0) throw failures.find((reason) => isCancellation(reason) === cancelled) ?? failures[0];
    state.append = pending.done.map((call) => (call as ToolCallResult).message);
    delete state.pending;
  };

  /**
   * Saves the agent's place when it has one (an agent of a batch): its state when it ends without an answer, its outcome
   * when it answers. Not cancellable, and never fails the agent: a place that could not be saved costs a resume its head
   * start (its steps are sent again), not the agent its result.
   */
  const savePlace = async (saved: SavedPlace): Promise<void> => {
    if (place === undefined) return;
    // A model step cut short is not a step taken: the resumed agent takes it again under the same number.
    if (saved.state && stepInFlight) saved = { state: { ...saved.state, steps: saved.state.steps - 1 } };
    if (input.placeFingerprint !== undefined) saved = { ...saved, fingerprint: input.placeFingerprint };
    // A person's answer to a call of the pending step is kept: the resumed agent does not ask again.
    const pending = saved.state?.pending;
    const decisions = Object.fromEntries(
      (pending?.result.calls ?? []).flatMap((call) => {
        const decision = tracker.decisions.get(call.id);
        return decision ? [[call.id, decision] as const] : [];
      }),
    );
    if (saved.state && pending && Object.keys(decisions).length > 0)
      saved = { ...saved, state: { ...saved.state, pending: { ...pending, decisions } } };
    await CancellationScope.nonCancellable(() => saveAgentPlace({ place, saved })).catch(() => undefined);
  };

  /** The loop itself; a failure leaves it with the spend so far attached (failureWithSpend). */
  const loop = async (): Promise<AgentOutcome> => {
    const withheld = withheldTools(toolCalls);
    let stepsThisRun = 0;
    for (;;) {
      // Resumed from a saved place in the middle of a step: its tool calls that had no result yet run now.
      if (state.pending) await runTools(state.pending);
      const spent = budgetReached(state, budgets);
      if (spent) {
        tracker.emit('stopped', state.steps, spent.message);
        describe(`stopped: ${spent.message}`);
        const kept = state.transcript ? `; its transcript so far is kept at ${state.transcript.uri}` : '';
        await savePlace({ state });
        return outcome('stopped', {
          stoppedBy: spent.reason,
          message: `agent "${task.id}" stopped after ${state.steps} steps: ${spent.message}${kept}`,
        });
      }
      if (stepsThisRun >= stepsPerRun || workflowInfo().continueAsNewSuggested) {
        // A cancel that came while the step's tool calls answered anyway must not be carried off by continue-as-new
        // (which a cancelled scope does not refuse, as it refuses an activity).
        if (CancellationScope.current().consideredCancelled) throw new CancelledFailure('agent cancelled');
        tracker.emit('continued', state.steps, 'continuing as new');
        await continueAsNew<typeof agent>({ ...input, state: { ...state, eventSeq: tracker.eventSeq } });
      }
      state.steps += 1;
      stepsThisRun += 1;
      const step = state.steps;
      describe(`step ${step}`);
      stepInFlight = true;
      const result = await agentStep.executeWithOptions({ activityId: `step:${step}`, summary: `step ${step}` }, [
        {
          task: state.transcript === undefined ? task : laterStepTask,
          step,
          ...(state.transcript === undefined ? {} : { transcript: state.transcript }),
          append: state.append,
          ...(state.note === undefined ? {} : { note: state.note }),
          ...(state.transcript === undefined && input.dependencies ? { dependencies: input.dependencies } : {}),
          ...(state.transcript === undefined && input.synthesis ? { synthesis: input.synthesis } : {}),
          ...(withheld.length > 0 ? { withheld } : {}),
          inlineOutputBytes: input.inlineOutputBytes,
          ...(input.storeOutput ? { storeOutput: true } : {}),
        },
      ]);
      stepInFlight = false;
      state.transcript = result.transcript;
      state.append = [];
      state.note = undefined;
      state.model = result.model;
      addSpend(state, result);
      tracker.emit(
        'step',
        step,
        result.next === 'tools'
          ? `${result.calls.length} tool calls: ${result.calls.map((call) => call.summary).join(', ')}`
          : 'answered',
      );
      if (result.next === 'repair') {
        if (state.repairs >= repairsAllowed) {
          throw ApplicationFailure.create({
            type: AgentFailureType.OutputInvalid,
            message: `agent "${task.id}": the answer still did not match its output schema after ${state.repairs} repairs: ${result.invalid}`,
            nonRetryable: true,
          });
        }
        state.repairs += 1;
        state.note = `Your answer was not accepted: ${result.invalid}. Answer again with JSON only that matches the schema.`;
        tracker.emit('repair', step, result.invalid);
        continue;
      }
      if (result.next === 'answer') {
        tracker.emit('answer', step, result.output === undefined ? 'answer stored' : result.output.slice(0, 120));
        describe('answered');
        const answered = outcome('ok', {
          ...(result.output === undefined ? {} : { output: result.output }),
          ...(result.outputRef === undefined ? {} : { outputRef: result.outputRef }),
          finishReason: result.finishReason,
        });
        await savePlace({ outcome: answered });
        return answered;
      }
      await runTools({ step, result, done: result.calls.map(() => null) });
    }
  };

  try {
    return await loop();
  } catch (error) {
    // Not for a bug (not a Temporal failure): that fails the workflow task, which is retried, and the agent goes on.
    if (isCancellation(error) || error instanceof TemporalFailure) await savePlace({ state });
    if (isCancellation(error)) {
      await reportCancelledSpend();
      throw error;
    }
    const described = failed(task, error, 0, options.retry.maximumAttempts);
    const { type, message } = described.error ?? { type: FailureType.Unknown, message: String(error) };
    throw failureWithSpend(error, { type, message, attempts: described.attempts }, spendOf(state));
  }
}
