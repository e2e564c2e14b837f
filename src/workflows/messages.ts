import { defineQuery } from '@temporalio/workflow';
import type { BatchProgress } from '../contract/batch';
import type { RunEventPage } from '../contract/events';
import type { RunProgress } from '../contract/fan-out';

/** Progress of a run: counts and each task's state. Answered by `fanOut` (and the other run shapes). */
export const progressQuery = defineQuery<RunProgress>('progress');

/** Progress of a batch, answered by whichever run of the batch is current (it carries its counters across continue-as-new). */
export const batchProgressQuery = defineQuery<BatchProgress>('progress');

/** The run's event log after a cursor: `query('events', cursor)`; pass back `nextCursor`. Answered by fanOut, dag and fanOutFanIn. */
export const eventsQuery = defineQuery<RunEventPage, [number]>('events');
