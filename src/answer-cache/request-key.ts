import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json';

/**
 * What decides an answer: where the request goes and everything it asks. `params` is the request body as sent
 * (model, messages, tools, tool choice, response format, sampling parameters, max tokens, stop ...), less what only
 * changes how it is served (`service_tier`: flex answers the same request at another price).
 */
export interface CacheableRequest {
  /** The provider's base URL (`https://api.openai.com/v1`), without a trailing slash. */
  baseUrl: string;
  /** `chat` (chat completions) or `responses`. */
  api: string;
  params: object;
}

/** Fields of a request body that do not change its answer. */
const NOT_IN_KEY = new Set(['service_tier']);

/** The sha256 (hex) of the canonical request: the entry's name in the cache. */
export function requestKey(request: CacheableRequest): string {
  const params = Object.fromEntries(
    Object.entries(request.params as Record<string, unknown>).filter(([name]) => !NOT_IN_KEY.has(name)),
  );
  const canonical = canonicalJson({
    endpoint: `${request.baseUrl.replace(/\/+$/, '')} ${request.api}`,
    params,
  });
  return createHash('sha256').update(canonical).digest('hex');
}

/** The key of a tool call whose `defineTool` opted in: the tool and its arguments, as canonical JSON. */
export function toolCallKey(tool: string, input: unknown): string {
  return createHash('sha256').update(canonicalJson({ tool, input })).digest('hex');
}
