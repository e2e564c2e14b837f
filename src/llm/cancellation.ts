import { Context } from '@temporalio/activity';
import { watchdogFor } from '../watchdog';

/**
 * Keeps a model call or tool call reachable by cancellation without periodic heartbeats: the worker's watchdog sees a
 * cancel request and sends the one heartbeat whose answer aborts the activity's `cancellationSignal`
 * (docs/ARCHITECTURE.md, "Economics"). The watchdog also calls `abort` when this worker has been cut off from Temporal
 * so long that its peers retry the call. Where there is no worker client (a test environment), or the run asked for a
 * heartbeat timeout, it heartbeats on a timer instead. Returns the function that stops it.
 */
export function watchForCancellation(
  intervalMs = 1000,
  abort?: (reason: unknown) => void,
  context: Context = Context.current(),
): () => void {
  const { info } = context;
  let client;
  try {
    client = context.client;
  } catch {
    client = undefined;
  }
  const stops: (() => void)[] = [];
  const execution = info.workflowExecution;
  if (client && execution) {
    stops.push(
      watchdogFor(client).register({
        workflowId: execution.workflowId,
        runId: execution.runId,
        activityId: info.activityId,
        attempt: info.attempt,
        poke: () => context.heartbeat(),
        ...(abort ? { abort } : {}),
      }),
    );
  }
  const heartbeatTimeoutMs = info.heartbeatTimeoutMs ?? 0;
  if (heartbeatTimeoutMs > 0 || !client) {
    const timer = setInterval(
      () => context.heartbeat(),
      heartbeatTimeoutMs > 0 ? Math.max(intervalMs, heartbeatTimeoutMs * 0.4) : intervalMs,
    );
    stops.push(() => clearInterval(timer));
  }
  return () => stops.forEach((stop) => stop());
}

/**
 * Calls `stop` once this worker's watchdog sees the server's cancel request for the current activity (its look at the
 * run), before the heartbeat whose answer aborts `cancellationSignal` comes back: a batch window's lanes on this worker
 * then stop starting calls in the same turn, where each heartbeat's own answer would tell them one by one. Without a
 * worker client (a test environment) it does nothing: the cancellation signal still comes. The run is looked at every
 * `watchIntervalMs` even when its workflow is hosted here (`everyLook`): its tasks may have moved to another worker, which
 * then gets the cancel's notice. Returns the function that stops watching.
 */
export function watchForCancelRequest(stop: () => void, context: Context = Context.current()): () => void {
  const { info } = context;
  const execution = info.workflowExecution;
  let client;
  try {
    client = context.client;
  } catch {
    return () => undefined;
  }
  if (!execution) return () => undefined;
  return watchdogFor(client).register({
    workflowId: execution.workflowId,
    runId: execution.runId,
    activityId: info.activityId,
    attempt: info.attempt,
    poke: () => context.heartbeat(),
    cancelRequested: stop,
    everyLook: true,
  });
}

/**
 * A signal aborted when `source` is (with its reason) or after `ms` (a TimeoutError, as `AbortSignal.timeout` gives);
 * `clear()` unhooks both, so nothing outlives the call.
 *
 * `afterArrived`: `source`'s abort reaches the signal two event-loop turns late, so an answer already in the socket when
 * the cancel came is read first. A cancel and an answer often land together (a budget stop, a fail-fast, calls of one
 * wave); aborted at once, the request throws away an answer the provider has sent and billed, and a resume pays for it
 * again. Two turns: the cancel may be handled in the poll that did not yet see the answer; the next poll reads it, and
 * its parsing and the client's reading of a body that is all there run before the turn ends. Still an abort within
 * a millisecond or so for a request that is really in flight.
 */
export function deadlineSignal(
  source: AbortSignal,
  ms: number,
  options: { afterArrived?: boolean } = {},
): { signal: AbortSignal; timedOut(): boolean; clear(): void } {
  const controller = new AbortController();
  let timedOut = false;
  const abortNow = () => controller.abort(source.reason);
  const onAbort = options.afterArrived ? () => setImmediate(() => setImmediate(abortNow)) : abortNow;
  if (source.aborted) abortNow();
  else source.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new DOMException(`timed out after ${ms} ms`, 'TimeoutError'));
  }, ms);
  timer.unref();
  return {
    signal: controller.signal,
    timedOut: () => timedOut && !source.aborted,
    clear: () => {
      clearTimeout(timer);
      source.removeEventListener('abort', onAbort);
    },
  };
}
