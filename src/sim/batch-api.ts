import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ProviderBatchSimConfig } from './provider-batch-config';
import type { ProviderBatchStore } from './provider-batch-store';

/** One request to a simulated batch API, with what its route needs to answer it. */
export interface BatchApiCall {
  request: IncomingMessage;
  response: ServerResponse;
  /** The URL's path, without its query. */
  path: string;
  url: URL;
  /** The configuration as it was when the request arrived. */
  config: ProviderBatchSimConfig;
  store: ProviderBatchStore;
}

/** A route of the batch APIs: it answers every request whose path is its prefix or below it. */
export type BatchApiRoute = (call: BatchApiCall) => Promise<void>;

/** The page of `all` a list request asks for with `limit` and `after` (OpenAI) or `after_id` (Anthropic). */
export function listPage<T extends { id: string }>(all: T[], url: URL): { data: T[]; has_more: boolean } {
  const limit = Number(url.searchParams.get('limit') ?? 20);
  const after = url.searchParams.get('after') ?? url.searchParams.get('after_id');
  const start = after ? all.findIndex((entry) => entry.id === after) + 1 : 0;
  const data = all.slice(start, start + limit);
  return { data, has_more: start + limit < all.length };
}
