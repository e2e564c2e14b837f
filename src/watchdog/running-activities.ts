import type { Context } from '@temporalio/activity';
import type { ActivityInterceptors } from '@temporalio/worker';

/**
 * The activities this worker is running, as their code sees them (workflow, run, activity id, attempt). Temporal can
 * record a task as started by this worker that never reached it (lost between the server and the worker): no code of
 * it runs here, nothing heartbeats or answers for it, and it would wait for its start-to-close timeout. A pending
 * activity that names this worker but is not in this set is such a task (LostCalls.judge).
 */
export class RunningActivities {
  private readonly running = new Map<string, number>();
  /** False unless the worker installed the interceptor (runningActivitiesInterceptor): without it, nothing is told. */
  tracking = false;
  /** Told of every activity that starts running here (HostedRuns crosses it off). */
  onStart: ((workflowId: string, runId: string, activityId: string) => void) | undefined;

  static key(workflowId: string, runId: string, activityId: string, attempt: number): string {
    return `${workflowId}\u0000${runId}\u0000${activityId}\u0000${attempt}`;
  }

  has(key: string): boolean {
    return this.running.has(key);
  }

  /** Counts the activity of `context` as running while its code (and the interceptors inside this one) has it. */
  interceptor(context: Context): ActivityInterceptors {
    return {
      inbound: {
        execute: async (input, next) => {
          const { info } = context;
          // A standalone activity (no workflow) is never pending in a workflow, so never judged.
          if (!info.workflowExecution) return next(input);
          const key = RunningActivities.key(
            info.workflowExecution.workflowId,
            info.workflowExecution.runId,
            info.activityId,
            info.attempt,
          );
          this.running.set(key, (this.running.get(key) ?? 0) + 1);
          this.onStart?.(info.workflowExecution.workflowId, info.workflowExecution.runId, info.activityId);
          try {
            return await next(input);
          } finally {
            const left = (this.running.get(key) ?? 1) - 1;
            if (left > 0) this.running.set(key, left);
            else this.running.delete(key);
          }
        },
      },
    };
  }
}
