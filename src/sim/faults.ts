import { parsePromptMarker, type FaultKind, type SimulatorConfig } from './config';
import { roll } from './seeded-roll';

/** The message of each fault status's error body. */
export const STATUS_MESSAGES: Record<string, string> = {
  '400': 'simulated bad request',
  '401': 'simulated: incorrect API key provided',
  '403': 'simulated: permission denied',
  '404': 'simulated: the model does not exist',
  '422': 'simulated: unprocessable request',
  '429': 'simulated: rate limit reached',
  '500': 'simulated: internal server error',
  '503': 'simulated: service unavailable',
};

export interface ChosenFault {
  kind?: FaultKind;
  retryAfterSeconds?: number;
  errorBytes?: number;
}

/**
 * The fault a task's `taskRequest`-th request meets: the one scripted for the task (by id or prompt marker) while its
 * `times` last, none after; else one rolled from the seed and the configured rates.
 */
export function chooseFault(config: SimulatorConfig, taskId: string, taskRequest: number, prompt: string): ChosenFault {
  const scripted = config.faultsByTask[taskId] ?? parsePromptMarker(prompt)?.fault;
  if (scripted && (scripted.times === undefined || taskRequest <= scripted.times)) {
    return { kind: scripted.kind, retryAfterSeconds: scripted.retryAfterSeconds, errorBytes: scripted.errorBytes };
  }
  if (scripted) return {};
  const value = roll(config.seed, 'fault', taskId, taskRequest);
  let threshold = 0;
  for (const [kind, rate] of Object.entries(config.faultRates) as [FaultKind, number][]) {
    threshold += rate;
    if (value < threshold) return { kind, retryAfterSeconds: config.retryAfterSeconds };
  }
  return {};
}

/** Milliseconds the task's request waits before it is answered: the prompt's marker, the task's setting, or rolled. */
export function latencyFor(config: SimulatorConfig, taskId: string, prompt: string): number {
  const marked = parsePromptMarker(prompt)?.latencyMs;
  if (marked !== undefined) return marked;
  const byTask = config.latencyByTask[taskId];
  if (byTask !== undefined) return byTask;
  const { minMs, maxMs } = config.latency;
  return Math.round(minMs + roll(config.seed, 'latency', taskId) * (maxMs - minMs));
}
