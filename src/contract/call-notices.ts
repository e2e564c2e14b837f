/**
 * What workflow code tells the worker it runs on about its activities, through a sink (in-process, no command, no RPC,
 * not called while a run replays), so that the worker's watchdog (src/watchdog/) reads Temporal only when something
 * happened rather than describing every workflow with calls in flight once a second.
 */
export const CALL_NOTICES_SINK = 'fanoutCallNotices';

/** The sink's functions; each takes the workflow's info first, as every sink does (the run they are about). */
// Type aliases, not interfaces: the SDK's `Sinks` is a record, which only an alias satisfies.
export type CallNotices = {
  /**
   * A workflow task this worker ran scheduled activity `activityId`: a later cancel in this run is likely to be seen
   * here too, and the activity is likely to start here (eager dispatch), which the worker checks.
   */
  scheduled: (activityId: string) => void;
  /** A cancellation scope that scheduled activities was cancelled: those still running are to be cancelled. */
  cancelRequested: () => void;
  /** The run's workflow function ended (returned, threw, or continued as new): no task of it is left to lose. */
  finished: () => void;
};

/** How workflow code declares the sink (`proxySinks<CallNoticeSinks>()`). */
export type CallNoticeSinks = { [CALL_NOTICES_SINK]: CallNotices };
