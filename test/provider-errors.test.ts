import { APIError } from 'openai';
import { retryAfterMs, toAgentFailure } from '../src/llm/provider-errors';
import { FailureType, isRetryableFailure, NON_RETRYABLE_FAILURE_TYPES } from '../src/contract/failure-types';

describe('retryAfterMs', () => {
  it('reads retry-after-ms first, in milliseconds', () => {
    expect(retryAfterMs(new Headers({ 'retry-after-ms': '1500', 'retry-after': '9' }))).toBe(1500);
  });

  it('reads retry-after in seconds', () => {
    expect(retryAfterMs(new Headers({ 'retry-after': '2' }))).toBe(2000);
    expect(retryAfterMs(new Headers({ 'retry-after': '0.5' }))).toBe(500);
  });

  it('reads retry-after as an HTTP date', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs(new Headers({ 'retry-after': 'Thu, 01 Jan 2026 00:00:30 GMT' }), now)).toBe(30_000);
  });

  it('ignores absent, negative and unreadable values', () => {
    expect(retryAfterMs(undefined)).toBeUndefined();
    expect(retryAfterMs(new Headers())).toBeUndefined();
    expect(retryAfterMs(new Headers({ 'retry-after': 'soon' }))).toBeUndefined();
    expect(retryAfterMs(new Headers({ 'retry-after-ms': '-5' }))).toBeUndefined();
  });

  it('caps absurd values at one hour', () => {
    expect(retryAfterMs(new Headers({ 'retry-after': '999999' }))).toBe(3_600_000);
  });
});

describe('one table decides what is retried', () => {
  it('retries provider outages, timeouts, lost workers and a missing payload; never bad requests, exhausted quotas or changed files', () => {
    for (const type of [
      'ProviderUnavailable',
      'RateLimited',
      'Timeout',
      'ConnectionError',
      'WorkerLost',
      'WorkerStopping',
      'StorageUnavailable',
      'PayloadUnavailable',
      'Unknown',
    ]) {
      expect([type, isRetryableFailure(type)]).toEqual([type, true]);
    }
    for (const type of [
      'InvalidInput',
      'BadRequest',
      'Unauthorized',
      'Forbidden',
      'NotFound',
      'Unprocessable',
      'QuotaExceeded',
      'RateLimitWaitExceeded',
      'SourceChanged',
    ]) {
      expect([type, isRetryableFailure(type)]).toEqual([type, false]);
    }
  });

  it("lets a failure's own non-retryable flag turn a retry off, never on", () => {
    expect(isRetryableFailure(FailureType.PayloadUnavailable, true)).toBe(false);
    expect(isRetryableFailure(FailureType.BadRequest, false)).toBe(false);
    expect(isRetryableFailure(undefined)).toBe(true);
  });

  it.each([400, 401, 403, 404, 408, 409, 422, 429, 499, 500, 503])(
    "maps HTTP %i to a failure whose retryability is the table's",
    (status) => {
      const error = APIError.generate(status, { error: { message: 'refused' } }, 'refused', new Headers());
      const failure = toAgentFailure(error, { taskId: 't', attempt: 1 });
      expect(failure.nonRetryable).toBe(!isRetryableFailure(failure.type ?? undefined));
      expect(failure.nonRetryable).toBe(
        (NON_RETRYABLE_FAILURE_TYPES as readonly string[]).includes(failure.type ?? ''),
      );
    },
  );
});
