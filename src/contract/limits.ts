/**
 * Per-run limits, chosen well inside Temporal's server defaults: 2,000 pending activities per workflow
 * (a workflow task that schedules more schedules none), 51,200 history events, 2 MB per payload.
 * A fan-out holds every result in its history and returns them in one payload, so it stays small;
 * larger workloads belong in a batch, whose results go to a sink.
 */
export const MAX_TASKS_PER_FAN_OUT = 1000;

/** Most agent activities one workflow run keeps in flight at once. */
export const MAX_IN_FLIGHT_PER_RUN = 500;

/** Longest accepted task id; ids become part of activity ids and sink lines. */
export const MAX_TASK_ID_LENGTH = 200;
