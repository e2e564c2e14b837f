import type { ServerResponse } from 'node:http';
import { listPage, type BatchApiCall } from './batch-api';
import { delay, readBody, sendJson } from './http';
import type { ProviderBatchStore } from './provider-batch-store';
import { elapsed, isDone, type SimBatch } from './simulated-batch';

const ANTHROPIC_CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/;

/** Anthropic's answer to a request it refuses or cannot find: an `error` of the given type. */
function refuse(response: ServerResponse, status: number, type: string, message: string): void {
  sendJson(response, status, { type: 'error', error: { type, message } });
}

function anthropicBatch(
  store: ProviderBatchStore,
  batch: SimBatch,
  baseUrl: string,
  settle = true,
): Record<string, unknown> {
  if (settle) store.advance(batch);
  const at = batch.ended?.at ?? elapsed(batch);
  const counts = { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 0 };
  for (const item of batch.items) {
    if (!batch.ended) counts.processing += 1;
    else if (isDone(item, at)) counts[item.fate === 'ok' ? 'succeeded' : 'errored'] += 1;
    else counts[batch.ended.status === 'cancelled' ? 'canceled' : 'expired'] += 1;
  }
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    id: batch.id,
    type: 'message_batch',
    processing_status: batch.ended ? 'ended' : batch.cancelledAt !== undefined ? 'canceling' : 'in_progress',
    request_counts: counts,
    created_at: iso(batch.createdAtMs),
    expires_at: iso(batch.createdAtMs + (batch.expiresAfterSeconds * 1000) / batch.speed),
    ended_at: batch.ended ? iso(Date.now()) : null,
    cancel_initiated_at: batch.cancelledAt === undefined ? null : iso(Date.now()),
    archived_at: null,
    results_url: batch.ended ? `${baseUrl}/v1/messages/batches/${batch.id}/results` : null,
  };
}

/** Anthropic's `/v1/messages/batches`: create, list, retrieve, cancel a batch and download its results. */
export async function anthropicBatches({ request, response, path, url, config, store }: BatchApiCall): Promise<void> {
  const baseUrl = `http://${request.headers.host ?? '127.0.0.1'}`;
  if (request.method === 'POST' && path === '/v1/messages/batches') {
    const body = JSON.parse((await readBody(request)).toString('utf8') || '{}') as {
      requests?: { custom_id: string; params: Record<string, unknown> }[];
    };
    const requests = body.requests ?? [];
    const refused = requests.find(
      (entry) => !ANTHROPIC_CUSTOM_ID.test(entry.custom_id) || typeof entry.params?.max_tokens !== 'number',
    );
    if (requests.length === 0 || refused) {
      return refuse(
        response,
        400,
        'invalid_request_error',
        `simulated: invalid request ${refused?.custom_id ?? '(none)'}: custom_id must match ^[a-zA-Z0-9_-]{1,64}$ and max_tokens is required`,
      );
    }
    if (new Set(requests.map((entry) => entry.custom_id)).size !== requests.length)
      return refuse(response, 400, 'invalid_request_error', 'simulated: custom_id values must be unique');
    const batch = store.newBatch(
      'anthropic',
      '/v1/messages',
      '',
      {},
      requests.map((entry) => ({ customId: entry.custom_id, body: entry.params })),
    );
    await delay(config.latencyMs.create);
    return sendJson(response, 200, anthropicBatch(store, batch, baseUrl));
  }
  if (request.method === 'GET' && path === '/v1/messages/batches') {
    const all = [...store.batches.values()].filter((batch) => batch.provider === 'anthropic').reverse();
    const page = listPage(all, url);
    return sendJson(response, 200, {
      data: page.data.map((batch) => anthropicBatch(store, batch, baseUrl)),
      has_more: page.has_more,
      first_id: page.data[0]?.id ?? null,
      last_id: page.data.at(-1)?.id ?? null,
    });
  }
  const match = /^\/v1\/messages\/batches\/([^/]+)(\/cancel|\/results)?$/.exec(path);
  const batch = match ? store.batches.get(match[1]) : undefined;
  if (!match || !batch || batch.provider !== 'anthropic')
    return refuse(response, 404, 'not_found_error', `simulated: no such batch ${match?.[1] ?? ''}`);
  if (match[2] === '/cancel' && request.method === 'POST') {
    store.cancel(batch);
    return sendJson(response, 200, anthropicBatch(store, batch, baseUrl, false));
  }
  if (match[2] === '/results') {
    store.advance(batch);
    if (!batch.ended?.results)
      return refuse(response, 400, 'invalid_request_error', 'simulated: the batch has not ended');
    store.stats.downloadsStarted += 1;
    await delay(config.latencyMs.download);
    response.writeHead(200, {
      'content-type': 'application/binary',
      'content-length': Buffer.byteLength(batch.ended.results),
    });
    response.end(batch.ended.results);
    return;
  }
  return sendJson(response, 200, anthropicBatch(store, batch, baseUrl));
}
