/**
 * What a failed read of the server says about the server. The watchdog's reads are gRPC calls, whose errors carry the
 * status `code`: https://grpc.github.io/grpc/core/md_doc_statuscodes.html.
 */
const CANCELLED = 1;
const DEADLINE_EXCEEDED = 4;
const NOT_FOUND = 5;
const UNAVAILABLE = 14;

function statusCode(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}

/**
 * The call's deadline ran out: DEADLINE_EXCEEDED, or CANCELLED from a worker's native connection. The normal end of an
 * empty poll, but no proof of contact: a server that cannot be reached ends calls the same way.
 */
export function deadlineExpired(error: unknown): boolean {
  const code = statusCode(error);
  return code === DEADLINE_EXCEEDED || code === CANCELLED;
}

/**
 * Whether a failed read got as far as the server (which then refused it: throttled, not found ...). Only a transport
 * failure, or a deadline that ran out, says nothing came back.
 */
export function reachedServer(error: unknown): boolean {
  const code = statusCode(error);
  return typeof code === 'number' && !deadlineExpired(error) && code !== UNAVAILABLE;
}

/** NOT_FOUND: the workflow run is closed or deleted. */
export function notFound(error: unknown): boolean {
  return statusCode(error) === NOT_FOUND;
}

/** What a closed connection rejects with: nothing will ever answer again. */
export function connectionClosed(error: unknown): boolean {
  const name = (error as { name?: unknown } | null)?.name;
  return name === 'NativePromiseDroppedError' || name === 'IllegalStateError';
}
