import { heartbeating } from '../heartbeating';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { BatchResultLine } from '../../contract/batch';
import { FailureType } from '../../contract/failure-types';
import { childOf } from '../../contract/location';
import { addCacheSavings, addTokens, roundUsd, tokenCountsOf } from '../../contract/metrics';
import { invalidInputFailure } from '../../contract/invalid-input-failure';
import { InvalidInputError } from '../../contract/validation';
import { linesOf } from '../../spool/lines';
import { traceProviderBatch } from '../../telemetry/genai-spans';
import { costFields, priceOf, type PricingDependencies } from '../../pricing';
import { StorageError, type ObjectStorage } from '../../store';
import { AnthropicBatches } from '../../provider-batch/anthropic-batches';
import { OpenAiBatches } from '../../provider-batch/openai-batches';
import { okIdsOf, planParts, readPartMap } from '../../provider-batch/plan-parts';
import { retryableStatus } from '../../provider-batch/response-lines';
import type { PartKey, ProviderBatchClient } from '../../provider-batch/types';
import type {
  BatchPart,
  BatchProvider,
  PartCollected,
  PartAttempt,
  PlanInput,
  ProviderBatchActivities,
  ProviderBatchStatus,
  RetryLine,
} from '../../contract/provider-batch';

export interface ProviderBatchActivityDependencies extends PricingDependencies {
  storage: ObjectStorage;
  /** Model of tasks that name none. */
  defaultModel: string;
  /** The provider clients; default each made from the worker's environment on first use. */
  providerBatches?: Partial<Record<BatchProvider, ProviderBatchClient>>;
}

const HEARTBEAT_MS = 5000;

/** Maps what the providers and the store throw to failures Temporal retries or not. */
async function mapped<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof InvalidInputError) throw invalidInputFailure(error);
    if (error instanceof StorageError) {
      throw ApplicationFailure.create({
        type: FailureType.StorageUnavailable,
        message: error.message,
        nonRetryable: error.code === 'Invalid',
      });
    }
    const status = (error as { status?: unknown }).status;
    if (typeof status === 'number' && status >= 400 && !retryableStatus(status)) {
      throw ApplicationFailure.create({
        type: 'ProviderBatchRefused',
        message: `the provider refused a batch request (HTTP ${status}): ${(error as Error).message}`,
        nonRetryable: true,
      });
    }
    throw error;
  }
}

function segmentOf(spool: string, part: number): string {
  return childOf(spool, `seg-part-${String(part).padStart(5, '0')}.jsonl`);
}

function retryOf(spool: string, part: number): string {
  return childOf(spool, `retry-part-${String(part).padStart(5, '0')}.jsonl`);
}

/** The activities of the `providerBatch` workflow: plan, submit, poll, cancel and collect provider batches. */
export function createProviderBatchActivities(
  dependencies: ProviderBatchActivityDependencies,
): ProviderBatchActivities {
  const { storage } = dependencies;
  const clients: Partial<Record<BatchProvider, ProviderBatchClient>> = { ...dependencies.providerBatches };
  const clientOf = (provider: BatchProvider): ProviderBatchClient => {
    clients[provider] ??= provider === 'openai' ? new OpenAiBatches(storage) : new AnthropicBatches(storage);
    return clients[provider];
  };
  const keyOf = (input: PartAttempt): PartKey => ({
    batchId: input.batchId,
    spool: input.spool,
    part: input.part.index,
    digest: input.part.digest,
    attempt: input.attempt,
    notBefore: input.notBefore,
    recordUri: childOf(
      childOf(input.spool, 'parts'),
      `part-${String(input.part.index).padStart(5, '0')}.${input.part.provider}-${input.part.digest.slice(0, 16)}-a${input.attempt}.json`,
    ),
  });

  return {
    /** Splits the source into parts (one model each, under the provider's limits), written to the spool. */
    async planProviderBatch(input: PlanInput): Promise<{ parts: BatchPart[] }> {
      return heartbeating(HEARTBEAT_MS, () =>
        mapped(async () => {
          const skip = input.skipIds === undefined ? undefined : await okIdsOf(storage, input.skipIds);
          let only: Set<string> | undefined;
          if (input.retries !== undefined) {
            only = new Set();
            for (const retry of input.retries)
              for await (const line of linesOf(storage, retry))
                if (line.text) only.add((JSON.parse(line.text) as RetryLine).id);
          }
          const parts = await planParts(storage, input.source, input.spool, {
            defaultModel: input.model ?? dependencies.defaultModel,
            provider: input.provider,
            endpoint: input.endpoint,
            maxRequestsPerPart: input.maxRequestsPerPart,
            maxBytesPerPart: input.maxBytesPerPart,
            promptCache: input.promptCache,
            skip,
            only,
            firstIndex: input.firstIndex,
          });
          return { parts };
        }),
      );
    },

    /** The part's provider batch: found by its metadata (or record) when a lost attempt made it, else uploaded and created. */
    async submitProviderBatch(input: {
      batchId: string;
      spool: string;
      part: BatchPart;
      attempt: number;
      notBefore: number;
    }): Promise<{ id: string; reused: boolean }> {
      const { cancellationSignal } = Context.current();
      return heartbeating(HEARTBEAT_MS, () =>
        mapped(() => clientOf(input.part.provider).submit(input.part, keyOf(input), cancellationSignal)),
      );
    },

    /** The part's provider batch if one was created (a cancel must reach a batch whose submit was cut short). */
    async findProviderBatch(input: {
      batchId: string;
      spool: string;
      part: BatchPart;
      attempt: number;
      notBefore: number;
    }): Promise<string | null> {
      return mapped(async () => (await clientOf(input.part.provider).find(keyOf(input))) ?? null);
    },

    async pollProviderBatch(input: { provider: BatchProvider; id: string }): Promise<ProviderBatchStatus> {
      return mapped(() => clientOf(input.provider).status(input.id));
    },

    async cancelProviderBatch(input: { provider: BatchProvider; id: string }): Promise<void> {
      return mapped(() => clientOf(input.provider).cancel(input.id));
    },

    /**
     * Streams an ended batch's output and error files into the part's segment (one line per id: ok, or failed for good)
     * and its retry file (expired, cancelled, retryable errors, and items the provider did not mention). Both names are
     * fixed by the part and written whole, so a retry after a crash rewrites them with the same lines.
     */
    async collectProviderBatch(input: {
      spool: string;
      part: BatchPart;
      id?: string;
      durationMs: number;
      /** 0 for the first round of provider batches. */ round?: number;
      refused?: { type: string; message: string };
    }): Promise<PartCollected> {
      return heartbeating(HEARTBEAT_MS, () =>
        mapped(async () => {
          const { part } = input;
          const entries = new Map((await readPartMap(storage, part.map)).map((line) => [line.c, line]));
          const seen = new Set<string>();
          const retries: RetryLine[] = [];
          const collected: PartCollected = {
            succeeded: 0,
            failed: 0,
            retried: 0,
            tokens: { prompt: 0, completion: 0, total: 0 },
            cost: { usd: 0, unpricedCalls: 0 },
            standardUsd: 0,
          };
          const results = input.id === undefined ? undefined : clientOf(part.provider).results(input.id);
          async function* lines(): AsyncGenerator<string> {
            if (!results && input.refused) {
              // Refused whole, nothing of it ran: each item fails naming why (a resume sends them again).
              const error = { type: input.refused.type, message: input.refused.message };
              for (const [customId, entry] of entries) {
                seen.add(customId);
                collected.failed += 1;
                const line: BatchResultLine = {
                  id: entry.id,
                  status: 'failed',
                  error,
                  attempts: (input.round ?? 0) + 1,
                  durationMs: input.durationMs,
                };
                yield `${JSON.stringify(line)}\n`;
              }
            }
            if (!results) return;
            for await (const outcome of results) {
              const entry = entries.get(outcome.customId);
              if (!entry || seen.has(outcome.customId)) continue;
              seen.add(outcome.customId);
              if (outcome.kind === 'not-run' || (outcome.kind === 'error' && outcome.retryable)) {
                retries.push({
                  id: entry.id,
                  offset: entry.o,
                  length: entry.l,
                  reason: outcome.kind === 'not-run' ? outcome.reason : `${outcome.type}: ${outcome.message}`,
                });
                continue;
              }
              let line: BatchResultLine;
              if (outcome.kind === 'ok') {
                const cost = costFields(outcome.model, outcome.usage, dependencies.prices, 'batch');
                const standard = priceOf(outcome.model, outcome.usage, dependencies.prices, 'standard');
                line = {
                  id: entry.id,
                  status: 'ok',
                  output: outcome.output,
                  attempts: (input.round ?? 0) + 1,
                  durationMs: input.durationMs,
                  usage: outcome.usage,
                  ...cost,
                  model: outcome.model,
                };
                collected.succeeded += 1;
                addTokens(collected.tokens, tokenCountsOf(outcome.usage));
                if (cost.costUsd === undefined) collected.cost.unpricedCalls += 1;
                else collected.cost.usd += cost.costUsd;
                addCacheSavings(collected.cost, cost.cacheSavingsUsd);
                collected.standardUsd += standard ?? 0;
              } else {
                line = {
                  id: entry.id,
                  status: 'failed',
                  error: { type: outcome.type, message: outcome.message },
                  attempts: (input.round ?? 0) + 1,
                  durationMs: input.durationMs,
                };
                collected.failed += 1;
              }
              yield `${JSON.stringify(line)}\n`;
            }
          }
          const segment = segmentOf(input.spool, part.index);
          const bytes = await storage.writeStream(segment, lines());
          for (const [customId, entry] of entries) {
            if (!seen.has(customId))
              retries.push({
                id: entry.id,
                offset: entry.o,
                length: entry.l,
                reason: input.id === undefined ? 'the provider failed the batch' : 'no result from the provider',
              });
          }
          collected.retried = retries.length;
          if (retries.length > 0) {
            await storage.write(
              retryOf(input.spool, part.index),
              retries.map((line) => `${JSON.stringify(line)}\n`).join(''),
            );
            collected.retry = retryOf(input.spool, part.index);
          }
          if (bytes > 0) collected.segment = segment;
          else await storage.remove(segment);
          collected.cost.usd = roundUsd(collected.cost.usd);
          collected.standardUsd = roundUsd(collected.standardUsd);
          traceProviderBatch({
            provider: part.provider,
            model: part.model,
            id: input.id,
            part: part.index,
            requests: part.count,
            durationMs: input.durationMs,
            succeeded: collected.succeeded,
            failed: collected.failed,
            retried: collected.retried,
            inputTokens: collected.tokens.prompt,
            outputTokens: collected.tokens.completion,
            costUsd: collected.cost.usd,
            runId: Context.current().info.workflowExecution?.workflowId ?? input.spool,
          });
          return collected;
        }),
      );
    },

    /** Joins the parts' retry files into one (`<spool>/retry.jsonl`), streamed. */
    async joinProviderBatchRetries(input: { spool: string; retries: string[] }): Promise<string> {
      return heartbeating(HEARTBEAT_MS, () =>
        mapped(async () => {
          const uri = childOf(input.spool, 'retry.jsonl');
          async function* all(): AsyncGenerator<string> {
            for (const retry of input.retries)
              for await (const line of linesOf(storage, retry)) if (line.text) yield `${line.text}\n`;
          }
          await storage.writeStream(uri, all());
          return uri;
        }),
      );
    },
  };
}
