/**
 * Stable failure codes. Each is the `ApplicationFailure.type` an activity or workflow throws, so retry
 * policies (`nonRetryableErrorTypes`) and callers can match on it. The sandbox rewrites classes, so match on
 * these strings, never on `instanceof`.
 */
export const FailureType = {
  /** The input (tasks or options) can never succeed; named field in the message. */
  InvalidInput: 'InvalidInput',
  /** HTTP 429 from the provider. Waited out inside the attempt (it uses no attempt), honouring Retry-After. */
  RateLimited: 'RateLimited',
  /** Still rate-limited after the attempt's whole rate-limit wait budget (see RATE_LIMIT_WAIT_MS). Never retried. */
  RateLimitWaitExceeded: 'RateLimitWaitExceeded',
  /** HTTP 429 "insufficient_quota": the account is out of credit; waiting does not help. Never retried. */
  QuotaExceeded: 'QuotaExceeded',
  /** The worker running the call stopped polling Temporal; the attempt was failed on its behalf and is retried. */
  WorkerLost: 'WorkerLost',
  /**
   * The worker running a batch lane began to shut down (SIGTERM) before the lane's last item: the lane took no item
   * after that, its open calls finished within the grace, and it goes on from its journal on another worker. Retried.
   */
  WorkerStopping: 'WorkerStopping',
  /** HTTP 5xx from the provider. Retried. */
  ProviderUnavailable: 'ProviderUnavailable',
  /** HTTP 408 from the provider. Retried. */
  RequestTimeout: 'RequestTimeout',
  /** HTTP 409 from the provider. Retried. */
  Conflict: 'Conflict',
  /** The connection failed or was reset before a response arrived. Retried. */
  ConnectionError: 'ConnectionError',
  /** The HTTP request took longer than its deadline. Retried. */
  Timeout: 'Timeout',
  /** The provider answered 2xx with a body that is not a chat completion. Retried. */
  MalformedResponse: 'MalformedResponse',
  /** HTTP 400. Never retried. */
  BadRequest: 'BadRequest',
  /** HTTP 401: the API key is missing or wrong. Never retried. */
  Unauthorized: 'Unauthorized',
  /** HTTP 403. Never retried. */
  Forbidden: 'Forbidden',
  /** HTTP 404: usually an unknown model. Never retried. */
  NotFound: 'NotFound',
  /** HTTP 422. Never retried. */
  Unprocessable: 'Unprocessable',
  /** Any other 4xx. Never retried. */
  ClientError: 'ClientError',
  /** The activity attempt ran past its start-to-close or heartbeat timeout (reported by Temporal). */
  ActivityTimeout: 'ActivityTimeout',
  /** The agent was cancelled (run cancelled, fail-fast, or run timeout). */
  Cancelled: 'Cancelled',
  /** The agent was never started because the run stopped first. */
  NotStarted: 'NotStarted',
  /** The agent was not started because the run's token budget was spent. */
  BudgetExhausted: 'BudgetExhausted',
  /** A DAG node was not started because a dependency did not succeed. */
  DependencyFailed: 'DependencyFailed',
  /**
   * A stored payload (prompt, output, dependency context) is missing or does not match its reference: usually a
   * FANOUT_STORE that is not shared by every worker and client, or one still being set up. Retried, bounded by the
   * retry policy (a single call and an item of a lane alike); a reference that can never be valid is thrown with the
   * non-retryable flag.
   */
  PayloadUnavailable: 'PayloadUnavailable',
  /** The payload store or a batch's source or sink could not be reached or written. Retried a bounded number of times. */
  StorageUnavailable: 'StorageUnavailable',
  /** A batch's task file changed while the batch ran (a line no longer holds the task it held). Never retried. */
  SourceChanged: 'SourceChanged',
  /** Results a batch recorded are missing from its spool: the sink would be short, so it is not written. Never retried. */
  ResultsMissing: 'ResultsMissing',
  /**
   * Under `--cache replay`, the answer cache holds no answer for the request (or only a corrupted one): the message
   * names the task and the request's hash. Never retried.
   */
  CacheMiss: 'CacheMiss',
  /** Something unclassified; see the message. */
  Unknown: 'Unknown',
} as const;

export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/**
 * Failure types an agent activity throws that Temporal must never retry: the one table of what is retried, for a single
 * call and for each item of a lane alike (see `isRetryableFailure`). Everything else is retried, bounded by the
 * run's retry policy.
 */
export const NON_RETRYABLE_FAILURE_TYPES: readonly FailureType[] = [
  FailureType.InvalidInput,
  FailureType.RateLimitWaitExceeded,
  FailureType.QuotaExceeded,
  FailureType.BadRequest,
  FailureType.Unauthorized,
  FailureType.Forbidden,
  FailureType.NotFound,
  FailureType.Unprocessable,
  FailureType.ClientError,
  FailureType.SourceChanged,
  FailureType.ResultsMissing,
  FailureType.CacheMiss,
];

const nonRetryableTypes: ReadonlySet<string> = new Set(NON_RETRYABLE_FAILURE_TYPES);

/**
 * Whether a failure of this type is retried: every path that decides (provider errors, a lane's items) asks here.
 * `nonRetryableFlag` is the failure's own `nonRetryable`, set where one instance of a retryable type can never succeed
 * (an invalid payload reference); it only ever turns a retry off.
 *
 * @example
 * isRetryableFailure('ProviderUnavailable'); // true
 * isRetryableFailure('PayloadUnavailable', true); // false
 */
export function isRetryableFailure(type: string | undefined, nonRetryableFlag = false): boolean {
  if (nonRetryableFlag) return false;
  return type === undefined || !nonRetryableTypes.has(type);
}
