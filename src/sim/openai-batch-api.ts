import type { ServerResponse } from 'node:http';
import { listPage, type BatchApiCall } from './batch-api';
import type { ProviderBatchSimConfig } from './provider-batch-config';
import { delay, multipartParts, readBody, sendJson } from './http';
import type { ProviderBatchStore, StoredFile } from './provider-batch-store';
import { elapsed, isAnswered, isDone, type SimBatch } from './simulated-batch';

/** OpenAI's answer to a request it refuses: `invalid_request_error` with the reason. */
function refuse(response: ServerResponse, status: number, message: string): void {
  sendJson(response, status, { error: { message, type: 'invalid_request_error' } });
}

const fileObject = (file: StoredFile) => ({
  id: file.id,
  object: 'file',
  bytes: file.data.length,
  created_at: file.createdAt,
  filename: file.filename,
  purpose: file.purpose,
  status: 'processed',
});

function openAiStatus(batch: SimBatch): string {
  if (batch.failed) return 'failed';
  if (batch.ended) return batch.ended.status;
  return batch.cancelledAt !== undefined ? 'cancelling' : 'in_progress';
}

/** The batch as OpenAI shows it; the answer to a cancel shows it `cancelling`, as OpenAI's does, and ends it later. */
function openAiBatch(store: ProviderBatchStore, batch: SimBatch, settle = true): Record<string, unknown> {
  if (settle) store.advance(batch);
  const at = batch.ended?.at ?? batch.cancelledAt ?? elapsed(batch);
  const completed = batch.failed ? 0 : batch.items.filter((item) => isAnswered(item, at)).length;
  const failed = batch.failed
    ? 0
    : batch.ended
      ? batch.items.length - completed
      : batch.items.filter((item) => isDone(item, at) && item.fate !== 'ok').length;
  const created = Math.floor(batch.createdAtMs / 1000);
  return {
    id: batch.id,
    object: 'batch',
    endpoint: batch.endpoint,
    input_file_id: batch.inputFileId,
    completion_window: '24h',
    status: openAiStatus(batch),
    created_at: created,
    expires_at: created + 86_400,
    metadata: batch.metadata,
    model: batch.items[0]?.model,
    output_file_id: batch.ended?.outputFileId,
    error_file_id: batch.ended?.errorFileId,
    errors: batch.failed
      ? {
          object: 'list',
          data: [{ code: batch.failed.code, message: batch.failed.message, line: null, param: null }],
        }
      : undefined,
    request_counts: { total: batch.items.length, completed, failed },
  };
}

/** OpenAI's `/v1/files`: upload (multipart), list, retrieve, download the content of, and delete a file. */
export async function openAiFiles({ request, response, path, url, config, store }: BatchApiCall): Promise<void> {
  if (request.method === 'POST' && path === '/v1/files') {
    const parts = multipartParts(await readBody(request), String(request.headers['content-type'] ?? ''));
    const purpose = parts.find((part) => part.name === 'purpose')?.data.toString('utf8');
    const file = parts.find((part) => part.name === 'file');
    if (!file || !purpose) return refuse(response, 400, 'simulated: a file and a purpose are required');
    const stored = store.storeFile(file.filename ?? 'upload.jsonl', purpose, Buffer.from(file.data));
    store.stats.filesUploaded += 1;
    await delay(config.latencyMs.upload);
    return sendJson(response, 200, fileObject(stored));
  }
  if (request.method === 'GET' && path === '/v1/files') {
    const purpose = url.searchParams.get('purpose');
    const all = [...store.files.values()].reverse().filter((file) => !purpose || file.purpose === purpose);
    const page = listPage(all.map(fileObject), url);
    return sendJson(response, 200, { object: 'list', ...page });
  }
  const match = /^\/v1\/files\/([^/]+)(\/content)?$/.exec(path);
  const file = match ? store.files.get(match[1]) : undefined;
  if (!match || !file) return refuse(response, 404, `simulated: no such file ${match?.[1] ?? ''}`);
  if (request.method === 'DELETE') {
    store.files.delete(file.id);
    return sendJson(response, 200, { id: file.id, object: 'file', deleted: true });
  }
  if (!match[2]) return sendJson(response, 200, fileObject(file));
  store.stats.downloadsStarted += 1;
  await delay(config.latencyMs.download);
  response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': file.data.length });
  response.end(file.data);
}

/** Why OpenAI would fail the new batch once it has validated its file (`failed`, with `errors`); undefined when it runs. */
function creationFailure(
  store: ProviderBatchStore,
  config: ProviderBatchSimConfig,
  batch: SimBatch,
  requests: { url: string }[],
  endpoint: string,
): SimBatch['failed'] {
  const models = new Set(batch.items.map((item) => item.model));
  const ids = new Set(batch.items.map((item) => item.customId));
  if (models.size > 1)
    return { code: 'mixed_models', message: 'simulated: every request of a batch must use the same model' };
  if (ids.size !== batch.items.length)
    return { code: 'duplicate_custom_id', message: 'simulated: custom_id values must be unique' };
  if (requests.some((entry) => entry.url !== endpoint))
    return { code: 'invalid_url', message: `simulated: every request's url must be ${endpoint}` };
  if (config.enqueuedTokenLimit === undefined) return undefined;
  const model = batch.items[0]?.model ?? '';
  const mine = batch.items.reduce((sum, item) => sum + item.promptTokens, 0);
  // The new batch is counted among the unfinished ones.
  if (store.enqueuedTokens(model) <= config.enqueuedTokenLimit) return undefined;
  return {
    code: 'token_limit_exceeded',
    message: `simulated: enqueued token limit reached for ${model} (limit ${config.enqueuedTokenLimit}, this batch ${mine})`,
  };
}

async function createBatch({ request, response, config, store }: BatchApiCall): Promise<void> {
  const body = JSON.parse((await readBody(request)).toString('utf8') || '{}') as {
    input_file_id?: string;
    endpoint?: string;
    completion_window?: string;
    metadata?: Record<string, string>;
  };
  const file = body.input_file_id ? store.files.get(body.input_file_id) : undefined;
  if (!file || file.purpose !== 'batch')
    return refuse(response, 400, `simulated: no batch input file ${body.input_file_id ?? ''}`);
  if (body.completion_window !== '24h') return refuse(response, 400, 'simulated: completion_window must be 24h');
  if (body.endpoint !== '/v1/chat/completions' && body.endpoint !== '/v1/responses')
    return refuse(response, 400, `simulated: unsupported endpoint ${body.endpoint ?? ''}`);
  const requests = file.data
    .toString('utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map(
      (line) => JSON.parse(line) as { custom_id: string; method: string; url: string; body: Record<string, unknown> },
    );
  const model = requests.map((entry) => entry.body.model).find((value) => typeof value === 'string');
  if (typeof model === 'string' && config.refusedModels.create.includes(model))
    return refuse(response, 400, `simulated: model ${model} is not available for batch`);
  const batch = store.newBatch(
    'openai',
    body.endpoint,
    file.id,
    body.metadata ?? {},
    requests.map((entry) => ({ customId: entry.custom_id, body: entry.body })),
  );
  const failure = creationFailure(store, config, batch, requests, body.endpoint);
  if (failure) {
    batch.failed = failure;
    store.recordStatus(batch, 'failed');
  }
  await delay(config.latencyMs.create);
  return sendJson(response, 200, openAiBatch(store, batch));
}

/** OpenAI's `/v1/batches`: create, list, retrieve and cancel a batch. */
export async function openAiBatches(call: BatchApiCall): Promise<void> {
  const { request, response, path, url, store } = call;
  if (request.method === 'POST' && path === '/v1/batches') return createBatch(call);
  if (request.method === 'GET' && path === '/v1/batches') {
    const all = [...store.batches.values()].filter((batch) => batch.provider === 'openai').reverse();
    const page = listPage(all, url);
    return sendJson(response, 200, {
      object: 'list',
      data: page.data.map((batch) => openAiBatch(store, batch)),
      has_more: page.has_more,
      first_id: page.data[0]?.id,
      last_id: page.data.at(-1)?.id,
    });
  }
  const match = /^\/v1\/batches\/([^/]+)(\/cancel)?$/.exec(path);
  const batch = match ? store.batches.get(match[1]) : undefined;
  if (!match || !batch || batch.provider !== 'openai')
    return refuse(response, 404, `simulated: no such batch ${match?.[1] ?? ''}`);
  const model = batch.items[0]?.model;
  if (model !== undefined && call.config.refusedModels.retrieve.includes(model))
    return refuse(response, 400, `simulated: batch ${batch.id} of model ${model} can no longer be read`);
  if (match[2] && request.method === 'POST') {
    store.cancel(batch);
    return sendJson(response, 200, openAiBatch(store, batch, false));
  }
  return sendJson(response, 200, openAiBatch(store, batch));
}
