/**
 * The workflow interceptor of every bundle (scripts/bundle-workflows.js, and the worker when it bundles from source)
 * that tells the worker's watchdog about activities through the call-notices sink (src/contract/call-notices.ts): that
 * this worker schedules them, when a cancellation scope that scheduled some is cancelled, and when the run ends. Sinks are not commands
 * and are not called while a run replays, so runs replay the same with or without it.
 *
 * This file runs in Temporal's workflow sandbox: it imports no Node module and nothing with I/O.
 */
import {
  CancellationScope,
  proxySinks,
  type ActivityInput,
  type Next,
  type WorkflowExecuteInput,
  type WorkflowInboundCallsInterceptor,
  type WorkflowInterceptors,
  type WorkflowOutboundCallsInterceptor,
} from '@temporalio/workflow';
import { CALL_NOTICES_SINK, type CallNoticeSinks } from '../contract/call-notices';

const notices = proxySinks<CallNoticeSinks>()[CALL_NOTICES_SINK];

/**
 * Scopes already listened to: one listener per scope, not per activity (a fan-out's scope schedules hundreds, and every
 * promise the sandbox makes costs it a captured stack).
 */
const listened = new WeakSet<CancellationScope>();

class CallNoticesInterceptor implements WorkflowOutboundCallsInterceptor {
  scheduleActivity(input: ActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleActivity'>) {
    // The id the SDK gives the activity when the options name none.
    notices.scheduled(input.options.activityId ?? `${input.seq}`);
    const scope = CancellationScope.current();
    if (scope.cancellable && !listened.has(scope)) {
      listened.add(scope);
      // Cancelling a scope cancels the activities scheduled in it and in the scopes inside it, each of which has its
      // own listener; an activity that already ended makes the watchdog look once for nothing.
      scope.cancelRequested.catch(() => notices.cancelRequested());
    }
    return next(input);
  }
}

class FinishedNoticeInterceptor implements WorkflowInboundCallsInterceptor {
  async execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    try {
      return await next(input);
    } finally {
      // Spares the watchdog's own-task check a describe of a run that ended (src/watchdog/hosted-runs.ts).
      notices.finished();
    }
  }
}

export const interceptors = (): WorkflowInterceptors => ({
  inbound: [new FinishedNoticeInterceptor()],
  outbound: [new CallNoticesInterceptor()],
});
