import { CancellationScope, sleep } from '@temporalio/workflow';
import type { AgentResult, AgentTask } from '../contract/agent-task';
import type { RunProgress, StopReason, TaskState } from '../contract/fan-out';
import type { ResolvedRunOptions } from '../contract/run-options';
import { agentActivities } from './agent-activity';
import { failed, notStarted, succeeded } from './task-outcome';

const STOP_MESSAGES: Record<StopReason, string> = {
  'fail-fast': 'another agent failed and the run fails fast',
  'run-timeout': 'the run reached its runTimeoutMs',
};

/**
 * The agents of one workflow run: starts each as an activity inside one cancellation scope, tracks every
 * task's state for the progress query, and stops the lot on fail-fast or the run timeout. Shared by the
 * run shapes (fan-out, DAG), which decide only the order tasks start in.
 */
export class AgentRun {
  readonly scope = new CancellationScope();
  readonly states: TaskState[];
  readonly results: (AgentResult | undefined)[];
  stoppedBy: StopReason | undefined;
  private readonly activities;
  private readonly timerScope = new CancellationScope();

  constructor(
    readonly tasks: readonly AgentTask[],
    readonly options: ResolvedRunOptions,
  ) {
    this.states = tasks.map(() => 'pending');
    this.results = tasks.map(() => undefined);
    this.activities = agentActivities(options);
    if (options.runTimeoutMs !== undefined) {
      const timeout = options.runTimeoutMs;
      void this.timerScope.run(() => sleep(timeout)).then(
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

  /** Runs task `index` (optionally with a rewritten prompt) and records its result. Never throws. */
  async runTask(index: number, task: AgentTask = this.tasks[index]): Promise<AgentResult> {
    this.states[index] = 'running';
    const startedAt = Date.now();
    let result: AgentResult;
    try {
      const call = await this.scope.run(() =>
        this.activities.callAgent.executeWithOptions({ activityId: `agent:${task.id}`, summary: task.name ?? task.id }, [task]),
      );
      result = succeeded(task, call, Date.now() - startedAt);
    } catch (error) {
      result = failed(task, error, Date.now() - startedAt, this.options.retry.maximumAttempts);
      if (result.status === 'failed' && this.options.errorPolicy === 'fail-fast') this.stop('fail-fast');
    }
    this.record(index, result);
    return result;
  }

  /** Records an outcome decided without running the task (skipped, not started). */
  record(index: number, result: AgentResult): void {
    this.results[index] = result;
    this.states[index] = result.status;
  }

  /** Every task's result in input order; tasks that never started are reported so. Ends the timer. */
  finish(): AgentResult[] {
    this.timerScope.cancel();
    const why = this.stoppedBy === undefined ? 'the run was cancelled' : STOP_MESSAGES[this.stoppedBy];
    return this.tasks.map((task, index) => this.results[index] ?? notStarted(task, why));
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
      tasks: this.tasks.map((task, index) => ({
        id: task.id,
        name: task.name ?? task.id,
        state: this.states[index],
        attempts: this.results[index]?.attempts ?? (this.states[index] === 'running' ? 1 : 0),
      })),
    };
  }
}
