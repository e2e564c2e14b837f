import { ApplicationFailure } from '@temporalio/common';
import { APIConnectionError, APIConnectionTimeoutError, APIError } from 'openai';
import { FailureType, isRetryableFailure } from '../contract/failure-types';

/** Longest Retry-After we follow; past it the retry policy's own backoff applies. */
const MAX_RETRY_AFTER_MS = 60 * 60 * 1000;

/** Structured details attached to every failure an agent activity throws. */
export interface AgentFailureDetails {
  taskId: string;
  attempt: number;
  status?: number;
}

const RETRYABLE_STATUS: Record<number, FailureType> = {
  408: FailureType.RequestTimeout,
  409: FailureType.Conflict,
  429: FailureType.RateLimited,
};

const NON_RETRYABLE_STATUS: Record<number, { type: FailureType; hint: string }> = {
  400: { type: FailureType.BadRequest, hint: 'the request was rejected; check the task fields' },
  401: { type: FailureType.Unauthorized, hint: 'check OPENAI_API_KEY on the workers' },
  403: { type: FailureType.Forbidden, hint: 'the key may not use this model or endpoint' },
  404: { type: FailureType.NotFound, hint: 'check the model name and OPENAI_BASE_URL' },
  422: { type: FailureType.Unprocessable, hint: 'the request was well-formed but refused' },
};

/**
 * Reads `retry-after-ms` (milliseconds) or `retry-after` (seconds or an HTTP date), the headers
 * OpenAI-compatible servers send with 429 and 503. Returns undefined when absent or unusable.
 */
export function retryAfterMs(headers: Headers | undefined, now: number = Date.now()): number | undefined {
  if (!headers) return undefined;
  const candidates: (number | undefined)[] = [];
  const milliseconds = headers.get('retry-after-ms');
  if (milliseconds !== null && milliseconds.trim() !== '') candidates.push(Number(milliseconds));
  const retryAfter = headers.get('retry-after');
  if (retryAfter !== null && retryAfter.trim() !== '') {
    const seconds = Number(retryAfter);
    if (Number.isFinite(seconds)) candidates.push(seconds * 1000);
    else {
      const date = Date.parse(retryAfter);
      if (Number.isFinite(date)) candidates.push(date - now);
    }
  }
  const first = candidates.find((value) => value !== undefined && Number.isFinite(value) && value >= 0);
  return first === undefined ? undefined : Math.min(Math.ceil(first), MAX_RETRY_AFTER_MS);
}

/** The provider's error code from an OpenAI-shaped body (`{"error": {"code": ...}}`), when it sent one. */
function providerCode(error: APIError): string | undefined {
  const code =
    error.code ??
    (typeof error.error === 'object' && error.error !== null && 'code' in error.error ? error.error.code : undefined);
  return typeof code === 'string' ? code : undefined;
}

/**
 * A 429 that waiting cures: the provider's rate limit. OpenAI also answers 429 "insufficient_quota" when the account
 * has no credit left, which no wait fixes.
 */
export function isRateLimit(error: unknown): error is APIError {
  return error instanceof APIError && error.status === 429 && providerCode(error) !== 'insufficient_quota';
}

/** The failure of a call that was still rate-limited when its attempt's wait budget ran out. Never retried. */
export function rateLimitWaitExceeded(
  context: { taskId: string; attempt: number },
  waitedMs: number,
  rateLimitedResponses: number,
  cause: unknown,
): ApplicationFailure {
  return failure(
    FailureType.RateLimitWaitExceeded,
    `agent "${context.taskId}" attempt ${context.attempt}: still rate-limited after waiting ${Math.round(waitedMs / 1000)} s ` +
      `(${rateLimitedResponses} responses were 429); lower the load on this provider key or raise its limits`,
    { taskId: context.taskId, attempt: context.attempt, status: 429 },
    cause instanceof Error ? cause : undefined,
  );
}

/** A failure whose retryability is the failure-type table's (src/contract/failure-types.ts), never decided here. */
function failure(
  type: FailureType,
  message: string,
  details: AgentFailureDetails,
  cause: Error | undefined,
  nextRetryDelay?: number,
): ApplicationFailure {
  return ApplicationFailure.create({
    type,
    message,
    nonRetryable: !isRetryableFailure(type),
    details: [details],
    cause,
    nextRetryDelay,
  });
}

/**
 * Maps whatever the provider call threw to the Temporal failure that decides whether Temporal retries it.
 * Which types are retried is the one table's (`isRetryableFailure`); the HTTP client itself never retries.
 */
export function toAgentFailure(error: unknown, context: { taskId: string; attempt: number }): ApplicationFailure {
  const cause = error instanceof Error ? error : undefined;
  const details: AgentFailureDetails = { taskId: context.taskId, attempt: context.attempt };
  const prefix = `agent "${context.taskId}" attempt ${context.attempt}`;

  if (error instanceof APIConnectionTimeoutError) {
    return failure(FailureType.Timeout, `${prefix}: the request timed out`, details, cause);
  }
  if (error instanceof APIConnectionError) {
    const reason = cause?.cause instanceof Error ? `: ${cause.cause.message}` : '';
    return failure(FailureType.ConnectionError, `${prefix}: connection failed${reason}`, details, cause);
  }
  if (error instanceof APIError && typeof error.status === 'number') {
    const status = error.status;
    const withStatus = { ...details, status };
    const providerMessage = error.message;
    if (status === 429 && !isRateLimit(error)) {
      const message = `${prefix}: HTTP 429: ${providerMessage}; the account's quota is used up, check its plan and billing`;
      return failure(FailureType.QuotaExceeded, message, withStatus, cause);
    }
    const retryable = RETRYABLE_STATUS[status] ?? (status >= 500 ? FailureType.ProviderUnavailable : undefined);
    if (retryable !== undefined) {
      const delay = retryAfterMs(error.headers);
      const after = delay === undefined ? '' : ` (retry after ${delay} ms)`;
      return failure(retryable, `${prefix}: HTTP ${status}${after}: ${providerMessage}`, withStatus, cause, delay);
    }
    const known = NON_RETRYABLE_STATUS[status];
    const type = known?.type ?? FailureType.ClientError;
    const hint = known ? `; ${known.hint}` : '';
    return failure(type, `${prefix}: HTTP ${status}: ${providerMessage}${hint}`, withStatus, cause);
  }
  // By name, not instanceof: the JSON parser may live in another realm than this module.
  if (typeof error === 'object' && error !== null && (error as { name?: unknown }).name === 'SyntaxError') {
    return failure(FailureType.MalformedResponse, `${prefix}: the response body is not valid JSON`, details, cause);
  }
  if (error instanceof ApplicationFailure) return error;
  const message = cause?.message ?? String(error);
  return failure(FailureType.Unknown, `${prefix}: ${message}`, details, cause);
}
