import { defineQuery } from '@temporalio/workflow';
import type { RunProgress } from '../contract/fan-out';

/** Progress of a run: counts and each task's state. Answered by `fanOut` (and the other run shapes). */
export const progressQuery = defineQuery<RunProgress>('progress');
