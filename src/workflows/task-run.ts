import {
  CancellationScope,
  isCancellation,
  setCurrentDetails,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { AgentCallInput } from '../contract/agent-call';
import type { AgentResult, AgentTask } from '../contract/agent-task';
import { runsAsAgent, withCallDefaults } from '../contract/agent-task-rules';
import { inlineOutputLimit } from '../contract/payload-ref';
import type { RunProgress, StopReason, TaskState } from '../contract/fan-out';
import { MAX_RUN_EVENTS, type RunEvent, type RunEventPage } from '../contract/events';
import { FailureType } from '../contract/failure-types';
import { describeMove, recordPacing, type PacingStatus } from '../contract/pacing';
import { addCacheSavings, roundUsd } from '../contract/metrics';
import type { ResolvedRunOptions } from '../contract/run-option-defaults';
import { modelCallActivity } from './model-call-activity';
import { agentWorkflowId, runAgentChild, withAgentFields } from './agent/agent-child';
import { spendOfFailure, type FailureSpend } from './agent/child-failure';
import { agentSpendSignal } from './agent/messages';
import { failed, notStarted, skipped, succeeded } from './task-outcome';

const STOP_MESSAGES: Record<StopReason, string> = {
  'fail-fast': 'another agent failed and the run fails fast',
  'run-timeout': 'the run reached its runTimeoutMs',
  budget: "the run's budget was reached",
};

/**
 * The agents of one workflow run: starts each as an activity inside one cancellation scope, tracks every
 * task's state for the progress query, and stops the lot on fail-fast, the run timeout or a spent budget. Shared by
 * the run shapes (fan-out, DAG), which decide only the order tasks start in.
 */
export class TaskRun {
  readonly scope = new CancellationScope();
  readonly states: TaskState[];
  readonly results: (AgentResult | undefined)[];
  stoppedBy: StopReason | undefined;
  tokensUsed = 0;
  /** US dollars of the answered calls whose model has a price, and how many answered calls had none. */
  costUsd = 0;
  unpricedCalls = 0;
  /** What providers' prompt caches saved on them (RunCost.cacheSavingsUsd), and the cached prompt tokens. */
  readonly cache: { cacheSavingsUsd?: number; cachedTokens: number } = { cachedTokens: 0 };
  /** The workers' pacing of this run's calls, as their results reported it. */
  readonly pacing: PacingStatus = { keys: [], moves: [] };
  /** What the Temporal UI shows for the run (its "current details"), before the spend so far. */
  private summary = '';
  private readonly events: RunEvent[] = [];
  private eventSeq = 0;
  private readonly activities;
  private readonly timerScope = new CancellationScope();
  /** Outputs above this travel as references, so every result of the run fits one workflow result payload. */
  readonly inlineOutputBytes: number;
  /** What cancelled agents spent, by their workflow id, as they reported it (agentSpendSignal). */
  private readonly cancelledSpend = new Map<string, FailureSpend>();

  constructor(
    readonly tasks: readonly AgentTask[],
    readonly options: ResolvedRunOptions,
  ) {
    this.states = tasks.map(() => 'pending');
    this.results = tasks.map(() => undefined);
    this.activities = modelCallActivity(options);
    this.inlineOutputBytes = inlineOutputLimit(tasks.length);
    this.emit('run-started', undefined, `${tasks.length} agents`);
    setHandler(agentSpendSignal, ({ workflowId, spend }) => void this.cancelledSpend.set(workflowId, spend));
    if (options.runTimeoutMs !== undefined) {
      const timeout = options.runTimeoutMs;
      void this.timerScope
        .run(() => sleep(timeout))
        .then(
          () => this.stop('run-timeout'),
          () => undefined, // the timer is cancelled when the run ends first
        );
    }
  }

  /** True once the run has stopped starting new agents (fail-fast, timeout, or the workflow was cancelled). */
  get stopped(): boolean {
    return this.scope.consideredCancelled;
  }

  stop(reason: StopReason): void {
    if (this.stopped) return;
    this.stoppedBy = reason;
    this.scope.cancel();
  }

  /** Appends to the bounded event log (the oldest events go first). */
  emit(type: RunEvent['type'], taskId?: string, detail?: string): void {
    this.events.push({
      seq: ++this.eventSeq,
      at: Date.now(),
      type,
      ...(taskId === undefined ? {} : { taskId }),
      ...(detail === undefined ? {} : { detail }),
    });
    if (this.events.length > MAX_RUN_EVENTS) this.events.shift();
  }

  /** The events after `cursor` (0 for all that are kept), at most `limit`. */
  eventsAfter(cursor: number, limit = 500): RunEventPage {
    const events = this.events.filter((event) => event.seq > cursor).slice(0, limit);
    return {
      events,
      nextCursor: events.length > 0 ? events[events.length - 1].seq : Math.max(cursor, 0),
      dropped: this.eventSeq - this.events.length,
    };
  }

  /** Sets the run's summary in the Temporal UI; the spend so far is shown under it as calls answer. */
  describe(summary: string): void {
    this.summary = summary;
    this.showDetails();
  }

  private showDetails(): void {
    const answered = this.costUsd > 0 || this.unpricedCalls > 0;
    const cost = `cost so far: $${this.costUsd}${this.unpricedCalls > 0 ? ` (+ ${this.unpricedCalls} unpriced calls)` : ''}, ${this.tokensUsed} tokens`;
    setCurrentDetails(answered ? `${this.summary}\n\n${cost}` : this.summary);
  }

  /** Which budget is spent, in words, or undefined while neither is. */
  private budgetReached(): string | undefined {
    const { tokenBudget, costBudgetUsd } = this.options;
    if (tokenBudget !== undefined && this.tokensUsed >= tokenBudget)
      return `the run's token budget (${tokenBudget}) is spent: ${this.tokensUsed} tokens used`;
    if (costBudgetUsd !== undefined && this.costUsd >= costBudgetUsd)
      return `the run's cost budget ($${costBudgetUsd}) is spent: $${this.costUsd} used`;
    return undefined;
  }

  /** What is left of the run's budgets, for an agent that shares them. */
  budgetLeft(): { tokens?: number; costUsd?: number } {
    const { tokenBudget, costBudgetUsd } = this.options;
    return {
      ...(tokenBudget === undefined ? {} : { tokens: Math.max(0, tokenBudget - this.tokensUsed) }),
      ...(costBudgetUsd === undefined ? {} : { costUsd: Math.max(0, costBudgetUsd - this.costUsd) }),
    };
  }

  get budgetSpent(): boolean {
    return this.budgetReached() !== undefined;
  }

  /**
   * Runs task `index` (with its dependencies' outputs or a synthesis's inputs, by reference) and records its result.
   * Never rejects. Once a budget is spent the task is not started but reported skipped. `settled`, when given, is
   * called with the result as it is recorded.
   *
   * A promise chain rather than an async function, for the first workflow task of a large fan-out: every promise a
   * workflow creates costs a stack capture (and a source-map lookup per frame) in the SDK's sandbox, and an async
   * function with an await makes two where this makes one.
   */
  runTask(
    index: number,
    context: Omit<AgentCallInput, 'task' | 'inlineOutputBytes'> = {},
    settled?: (result: AgentResult) => void,
  ): Promise<AgentResult> {
    const task = withCallDefaults(this.tasks[index], this.options);
    const spent = this.budgetReached();
    if (spent !== undefined) {
      const result = skipped(task, FailureType.BudgetExhausted, `skipped: ${spent}`);
      this.record(index, result);
      settled?.(result);
      return Promise.resolve(result);
    }
    this.states[index] = 'running';
    this.emit('agent-started', task.id);
    const startedAt = Date.now();
    // A task with tools runs as an `agent` child workflow; a plain task stays the one activity it always was.
    const execute = () =>
      runsAsAgent(task)
        ? runAgentChild(
            agentWorkflowId(workflowInfo().workflowId, task.id),
            task,
            this.options,
            { inlineOutputBytes: this.inlineOutputBytes, ...context },
            this.budgetLeft(),
          )
        : this.activities.callAgent.executeWithOptions(
            { activityId: `agent:${task.id}`, summary: task.name ?? task.id },
            [{ task, inlineOutputBytes: this.inlineOutputBytes, ...context }],
          );
    const finish = (result: AgentResult): AgentResult => {
      this.record(index, result);
      settled?.(result);
      return result;
    };
    // Callers that run all their tasks inside the run's scope (runInLanes) save a scope entry per task.
    const call = CancellationScope.current() === this.scope ? execute() : this.scope.run(execute);
    return call.then(
      (value) => {
        const result = withAgentFields(succeeded(task, value, Date.now() - startedAt), value);
        if (value.pacing)
          for (const move of recordPacing(this.pacing, value.pacing)) this.emit('pacing', task.id, describeMove(move));
        return finish(result);
      },
      (error: unknown) => {
        let result = failed(task, error, Date.now() - startedAt, this.options.retry.maximumAttempts);
        // An agent that failed or stopped on its budget paid for its steps: they count in the run's totals and budgets.
        // A cancelled one reported its spend by signal (agentSpendSignal) before it ended.
        const spent =
          spendOfFailure(error) ??
          (isCancellation(error)
            ? this.cancelledSpend.get(agentWorkflowId(workflowInfo().workflowId, task.id))
            : undefined);
        if (spent !== undefined)
          result = {
            ...result,
            usage: spent.usage,
            ...(spent.unpriced ? { unpriced: true } : { costUsd: spent.costUsd }),
          };
        if (result.status === 'failed' && this.options.errorPolicy === 'fail-fast') this.stop('fail-fast');
        if (result.status === 'cancelled' && this.stoppedBy === 'budget') {
          result = {
            ...result,
            error: {
              type: FailureType.BudgetExhausted,
              message: `agent "${task.id}" was cancelled while running: ${this.budgetReached() ?? STOP_MESSAGES.budget}`,
            },
          };
        }
        return finish(result);
      },
    );
  }

  /**
   * Records a task's outcome (run, skipped or not started), logs it, and adds its spend: once a budget is reached no
   * new agent starts and the ones in flight are cancelled.
   */
  record(index: number, result: AgentResult): void {
    this.results[index] = result;
    this.states[index] = result.status;
    this.tokensUsed += result.usage?.totalTokens ?? 0;
    this.costUsd = roundUsd(this.costUsd + (result.costUsd ?? 0));
    if (result.unpriced) this.unpricedCalls += 1;
    addCacheSavings(this.cache, result.cacheSavingsUsd);
    this.cache.cachedTokens += result.usage?.cachedPromptTokens ?? 0;
    if (result.attempts > 1) this.emit('agent-retried', result.id, `${result.attempts} attempts`);
    const type =
      result.status === 'ok'
        ? 'agent-finished'
        : result.status === 'failed'
          ? 'agent-failed'
          : result.status === 'cancelled'
            ? 'agent-cancelled'
            : 'agent-skipped';
    const spend = result.costUsd === undefined ? '' : `, $${result.costUsd}`;
    this.emit(
      type,
      result.id,
      result.error ? `${result.error.type}: ${result.error.message}` : `${result.durationMs} ms${spend}`,
    );
    if (result.usage !== undefined || result.costUsd !== undefined || result.unpriced) this.showDetails();
    if (this.budgetSpent && !this.stopped) this.stop('budget');
  }

  /** Every task's result in input order; tasks that never started are reported so. Ends the timer. */
  finish(): AgentResult[] {
    this.timerScope.cancel();
    const why = this.stoppedBy === undefined ? 'the run was cancelled' : STOP_MESSAGES[this.stoppedBy];
    const spent = this.stoppedBy === 'budget' ? `skipped: ${this.budgetReached() ?? why}` : undefined;
    const results = this.tasks.map(
      (task, index) =>
        this.results[index] ??
        (spent === undefined ? notStarted(task, why) : skipped(task, FailureType.BudgetExhausted, spent)),
    );
    this.emit('run-finished', undefined, this.stoppedBy ? `stopped by ${this.stoppedBy}` : undefined);
    return results;
  }

  progress(): RunProgress {
    const count = (state: TaskState) => this.states.filter((value) => value === state).length;
    const running = count('running');
    const pending = count('pending');
    return {
      total: this.tasks.length,
      done: this.tasks.length - running - pending,
      succeeded: count('ok'),
      failed: count('failed'),
      cancelled: count('cancelled'),
      skipped: count('skipped'),
      running,
      pending,
      cost: {
        usd: this.costUsd,
        unpricedCalls: this.unpricedCalls,
        ...(this.cache.cacheSavingsUsd === undefined ? {} : { cacheSavingsUsd: this.cache.cacheSavingsUsd }),
      },
      ...(this.cache.cachedTokens > 0 ? { cachedTokens: this.cache.cachedTokens } : {}),
      ...(this.pacing.keys.length > 0 ? { pacing: this.pacing } : {}),
      tasks: this.tasks.map((task, index) => ({
        id: task.id,
        name: task.name ?? task.id,
        state: this.states[index],
        attempts: this.results[index]?.attempts ?? (this.states[index] === 'running' ? 1 : 0),
        ...(runsAsAgent(task) ? { agentWorkflowId: agentWorkflowId(workflowInfo().workflowId, task.id) } : {}),
      })),
    };
  }
}
