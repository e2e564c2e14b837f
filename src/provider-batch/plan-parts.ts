import { promptCacheKeyOf } from '../llm/stable-request';
import { createHash } from 'node:crypto';
import type { AgentTask, PromptCache } from '../contract/agent-task';
import { BATCH_PROMPT_CACHE } from '../contract/batch';
import { cacheControl } from '../llm/anthropic-messages';
import { childOf } from '../contract/location';
import { linesOf } from '../spool/lines';
import { parseTaskLine } from '../spool/task-source';
import { InvalidInputError } from '../contract/validation';
import type { ObjectStorage } from '../store';
import { customIdFor, PROVIDER_LIMITS, providerOfModel } from './limits';
import type { BatchEndpoint, BatchPart, BatchProvider, PartMapLine } from '../contract/provider-batch';

export interface PlanOptions {
  /** Model of tasks that name none. */
  defaultModel: string;
  /** Provider of every part; default by model name (`claude-*` is Anthropic, the rest OpenAI). */
  provider?: BatchProvider;
  /** OpenAI endpoint; default chat completions. */
  endpoint?: BatchEndpoint;
  /** Most requests per part, under the provider's limit (tests set it low to get several parts). */
  maxRequestsPerPart?: number;
  /** Most bytes per part's request file, under the provider's limit. */
  maxBytesPerPart?: number;
  /** `max_tokens` of Anthropic requests whose task sets none (the Messages API requires one). Default 1024. */
  anthropicMaxTokens?: number;
  /**
   * Anthropic's prompt cache of requests whose task sets none: a breakpoint after the system prompt, which the batch's
   * items with the same system prompt then read (a batch runs for longer than 5 minutes). Default `1h`.
   */
  promptCache?: PromptCache;
  /** Task ids not to send (a resume's ok ids). */
  skip?: ReadonlySet<string>;
  /** The only task ids to send (items handed back by earlier provider batches, sent in a new round). */
  only?: ReadonlySet<string>;
  /** Number of the first part (a new round's parts follow the earlier rounds'). Default 0. */
  firstIndex?: number;
}

/** The provider request line of a task, in its batch input format. */
export function requestLine(
  task: AgentTask,
  model: string,
  provider: BatchProvider,
  endpoint: BatchEndpoint,
  customId: string,
  anthropicMaxTokens: number,
  promptCache: PromptCache = BATCH_PROMPT_CACHE,
): string {
  if (provider === 'anthropic') {
    const cache = task.promptCache ?? promptCache;
    const params = {
      model,
      max_tokens: task.maxTokens ?? anthropicMaxTokens,
      messages: [{ role: 'user', content: task.prompt }],
      ...(task.system === undefined
        ? {}
        : cache === 'off'
          ? { system: task.system }
          : { system: [{ type: 'text', text: task.system, cache_control: cacheControl(cache) }] }),
      ...(task.temperature === undefined ? {} : { temperature: task.temperature }),
    };
    return JSON.stringify({ custom_id: customId, params });
  }
  // As a sync call would send it (send-chat.ts), so the provider's cache sees items of one prefix together.
  const promptCacheKey =
    task.promptCacheKey ??
    promptCacheKeyOf(task.system === undefined ? [] : [{ role: 'system', content: task.system }], undefined);
  const cacheKey = promptCacheKey === undefined ? {} : { prompt_cache_key: promptCacheKey };
  const body =
    endpoint === '/v1/responses'
      ? {
          model,
          input: task.prompt,
          ...(task.system === undefined ? {} : { instructions: task.system }),
          ...(task.temperature === undefined ? {} : { temperature: task.temperature }),
          ...(task.maxTokens === undefined ? {} : { max_output_tokens: task.maxTokens }),
          ...cacheKey,
        }
      : {
          model,
          messages: [
            ...(task.system === undefined ? [] : [{ role: 'system', content: task.system }]),
            { role: 'user', content: task.prompt },
          ],
          ...(task.temperature === undefined ? {} : { temperature: task.temperature }),
          ...(task.maxTokens === undefined ? {} : { max_tokens: task.maxTokens }),
          ...cacheKey,
        };
  return JSON.stringify({ custom_id: customId, method: 'POST', url: endpoint, body });
}

function partName(index: number): string {
  return `part-${String(index).padStart(5, '0')}`;
}

/** Where a part's request file and map live in the spool. */
export function partFiles(spool: string, index: number): { requests: string; map: string } {
  const base = childOf(childOf(spool, 'parts'), partName(index));
  return { requests: `${base}.requests.jsonl`, map: `${base}.map.jsonl` };
}

interface Pending {
  task: AgentTask;
  offset: number;
  length: number;
}

/**
 * Splits the task file into provider batches: one model per part, each under the provider's request and byte limits.
 * The source is streamed (once to count the models, once per model to write its parts); every part's request file is
 * streamed into the store and its map written beside it. Names are fixed by the part's number, and the same source
 * gives the same parts, so a repeated plan (a retry after a crash) rewrites the same objects.
 */
export async function planParts(
  storage: ObjectStorage,
  source: string,
  spool: string,
  options: PlanOptions,
): Promise<BatchPart[]> {
  const models = new Map<string, number>();
  const modelOf = (task: AgentTask) => task.model ?? options.defaultModel;
  for await (const { task } of tasksOf(storage, source, options))
    models.set(modelOf(task), (models.get(modelOf(task)) ?? 0) + 1);
  const parts: BatchPart[] = [];
  for (const model of [...models.keys()].sort()) {
    const provider = options.provider ?? providerOfModel(model);
    const endpoint = options.endpoint ?? '/v1/chat/completions';
    const maxRequests = Math.min(options.maxRequestsPerPart ?? Infinity, PROVIDER_LIMITS[provider].requests);
    const maxBytes = Math.min(options.maxBytesPerPart ?? Infinity, PROVIDER_LIMITS[provider].bytes);
    const tasks = tasksOf(storage, source, options, model, modelOf)[Symbol.asyncIterator]();
    let carried: Pending | undefined;
    let exhausted = false;
    while (!exhausted) {
      const index = (options.firstIndex ?? 0) + parts.length;
      const files = partFiles(spool, index);
      const map: PartMapLine[] = [];
      let bytes = 0;
      // Pulls tasks until the part is full; the task that would overflow it is carried into the next part.
      async function* lines(): AsyncGenerator<string> {
        for (;;) {
          const next = carried ?? (await tasks.next()).value;
          carried = undefined;
          if (!next) {
            exhausted = true;
            return;
          }
          const customId = customIdFor(next.task.id, map.length);
          const line = `${requestLine(next.task, model, provider, endpoint, customId, options.anthropicMaxTokens ?? 1024, options.promptCache)}\n`;
          const size = Buffer.byteLength(line);
          if (map.length > 0 && (map.length >= maxRequests || bytes + size > maxBytes)) {
            carried = next;
            return;
          }
          if (size > maxBytes)
            throw new InvalidInputError([
              {
                path: `${source} at byte ${next.offset}`,
                message: `task "${next.task.id}" is ${size} bytes as a request, over the ${maxBytes}-byte part limit`,
              },
            ]);
          map.push({ c: customId, id: next.task.id, o: next.offset, l: next.length });
          bytes += size;
          yield line;
        }
      }
      await storage.writeStream(files.requests, lines());
      if (map.length === 0) {
        await storage.remove(files.requests);
        break;
      }
      const mapText = map.map((line) => JSON.stringify(line)).join('\n') + '\n';
      await storage.write(files.map, mapText);
      const digest = createHash('sha256').update(mapText).digest('hex');
      parts.push({ index, provider, model, endpoint, count: map.length, bytes, ...files, digest });
    }
  }
  return parts;
}

async function* tasksOf(
  storage: ObjectStorage,
  source: string,
  { skip, only }: Pick<PlanOptions, 'skip' | 'only'>,
  model?: string,
  modelOf?: (task: AgentTask) => string,
): AsyncGenerator<Pending> {
  for await (const line of linesOf(storage, source)) {
    if (line.text !== undefined && line.text.trim() === '') continue;
    const { task, issues } = parseTaskLine(line.text, `${source} line ${line.line}`);
    if (!task) throw new InvalidInputError(issues);
    if (skip?.has(task.id) || (only && !only.has(task.id))) continue;
    if (model !== undefined && modelOf?.(task) !== model) continue;
    yield { task, offset: line.offset, length: line.length };
  }
}

/** A part's map, read whole (a part is bounded by the provider's request limit). */
export async function readPartMap(storage: ObjectStorage, map: string): Promise<PartMapLine[]> {
  const lines: PartMapLine[] = [];
  for await (const line of linesOf(storage, map)) if (line.text) lines.push(JSON.parse(line.text) as PartMapLine);
  return lines;
}

/** The ok ids of a JSONL of result lines (a sink or a segment): what a resume does not send again. */
export async function okIdsOf(storage: ObjectStorage, uri: string): Promise<Set<string>> {
  const ids = new Set<string>();
  if ((await storage.size(uri)) === undefined) return ids;
  for await (const line of linesOf(storage, uri)) {
    try {
      const parsed = JSON.parse(line.text ?? '') as { id?: unknown; status?: unknown };
      if (parsed.status === 'ok' && typeof parsed.id === 'string') ids.add(parsed.id);
    } catch {
      // a torn line is not an ok result: its item is sent again
    }
  }
  return ids;
}
