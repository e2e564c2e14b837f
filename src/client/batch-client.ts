import { addCacheSavings, addTokens } from '../contract/metrics';
import path from 'node:path';
import { decodeFromPayloadsAtIndex } from '@temporalio/common/lib/internal-non-workflow';
import {
  CancelledFailure,
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  type Client,
  type WorkflowHandle,
} from '@temporalio/client';
import { assembleLeftover, probeWritable, spoolOf } from '../spool';
import { scanTaskSource } from '../spool/task-source';
import { hasBudget, PROVIDER_BATCH_BUDGET_REFUSAL, resolveAutoRoute } from '../contract/route-options';
import { isRemote } from '../contract/location';
import { StorageError, storeRootFromEnvironment, type ObjectStorage } from '../store';
import { checkWorkflowId } from './workflow-id';
import {
  BATCH_DEFAULTS,
  type BatchInput,
  type BatchOptions,
  type BatchProgress,
  type BatchSummary,
  stripesWanted,
  providerBatchWorkflowId,
  windowWorkflowId,
} from '../contract/batch';
import type { batch } from '../workflows/batch/batch';
import { InvalidInputError, validateBatchInput } from '../contract/validation';
import { resolveCacheSettings } from './cache-settings';
import { batchProgressQuery } from '../workflows/messages';
import { windowProgressQuery } from '../workflows/batch/messages';
import { providerBatchProgressQuery } from '../workflows/provider-batch/messages';
import type { DescribableRun } from './query-gate';
import type { BatchActivities } from '../contract/batch-activities';

/** The activity a batch writes its sink with (its type is the name of `BatchActivities`' method). */
const FINISH_ACTIVITY: keyof BatchActivities = 'finishBatch';

/** What starts a batch. */
export interface StartBatchRequest {
  /** JSONL task file: a local path every worker can read, or an s3:// URI (workers on any machine). */
  source: string;
  /** JSONL result file: a local path every worker can write, or an s3:// URI. */
  sink: string;
  /** Default `batch-<random>`. Starting an id that exists attaches to it instead of running it twice. */
  batchId?: string;
  options?: BatchOptions;
}

/** How a cancelled batch ended: cancelled, finished before the cancel reached it, failed, or not waited for. */
export type BatchCancelOutcome = 'cancelled' | 'finished' | 'failed' | 'requested';

/** A batch, started or attached to. */
export interface BatchHandle {
  readonly batchId: string;
  /** True when the id existed already and this handle attached to it. */
  readonly attached: boolean;
  progress(): Promise<BatchProgress>;
  /**
   * Cancels the batch: its calls in flight are aborted, and every answered one is written to the sink. Returns once the
   * batch has ended (so no call of it starts after), with how it ended, unless `wait` is false ('requested'). A batch
   * already writing its sink when the cancel comes finishes ('finished'): every item has its line then.
   */
  cancel(options?: { wait?: boolean }): Promise<BatchCancelOutcome>;
  /** Waits for the batch to end and returns its summary (results are in the sink). */
  result(): Promise<BatchSummary>;
  readonly workflow: WorkflowHandle<typeof batch>;
  /**
   * What a `QueryGate` describes to see the batch move: the batch workflow, and its provider-batch child while the last
   * progress named one (its polls do not move the batch's own history).
   */
  readonly movement: DescribableRun;
}

/**
 * The batch's progress: its own counts (windows that ended) plus those of its windows still running, and of its
 * provider-batch child while that runs (each provider batch with its status and counts).
 */
async function progressOf(client: Client, workflow: WorkflowHandle): Promise<BatchProgress> {
  const base = await workflow.query(batchProgressQuery);
  const [windows, route] = await Promise.all([
    Promise.all(
      (base.runningWindows ?? []).map((id) =>
        client.workflow
          .getHandle(id)
          .query(windowProgressQuery)
          .catch(() => undefined),
      ),
    ),
    // Between the child's end and the batch's next look the child may be gone from the query's reach: skipped then.
    base.providerBatchWorkflow === undefined
      ? undefined
      : client.workflow
          .getHandle(base.providerBatchWorkflow)
          .query(providerBatchProgressQuery)
          .catch(() => undefined),
  ]);
  const progress = { ...base, tokens: { ...base.tokens }, cost: base.cost ? { ...base.cost } : undefined };
  if (route) {
    progress.succeeded += route.succeeded;
    progress.failed += route.failed;
    if (route.tokens) addTokens(progress.tokens, route.tokens);
    if (progress.cost && route.cost) {
      progress.cost.usd += route.cost.usd;
      progress.cost.unpricedCalls += route.cost.unpricedCalls;
      addCacheSavings(progress.cost, route.cost.cacheSavingsUsd);
    }
    progress.providerBatches = route.providerBatches.map(({ provider, id, status, counts }) => ({
      provider,
      id,
      status,
      counts: { ...counts },
    }));
    progress.savingsUsd = route.savingsUsd;
    // Items in unended provider batches are in flight, as far as the batch is concerned.
    progress.inFlight += route.providerBatches
      .filter((batch) => batch.counts.processing > 0)
      .reduce((sum, batch) => sum + batch.counts.processing, 0);
  }
  for (const window of windows) {
    if (!window) continue;
    progress.succeeded += window.counters.succeeded;
    progress.failed += window.counters.failed;
    addTokens(progress.tokens, window.counters.tokens);
    if (progress.cost) {
      progress.cost.usd += window.counters.cost.usd;
      progress.cost.unpricedCalls += window.counters.cost.unpricedCalls;
      addCacheSavings(progress.cost, window.counters.cost.cacheSavingsUsd);
    }
    progress.inFlight += window.inFlight;
    progress.historyLength = Math.max(progress.historyLength, window.historyLength);
    if (window.pacing) progress.pacing = window.pacing;
    if (window.agents) progress.runningAgents = [...(progress.runningAgents ?? []), ...window.agents];
  }
  progress.done = progress.succeeded + progress.failed;
  progress.pending = Math.max(0, progress.total - progress.done - progress.inFlight);
  progress.callsPerSecond = (progress.done * 1000) / Math.max(1, progress.elapsedMs);
  progress.etaSeconds =
    progress.callsPerSecond > 0 ? Math.max(0, progress.total - progress.done) / progress.callsPerSecond : null;
  return progress;
}

function toBatchHandle(client: Client, workflow: WorkflowHandle<typeof batch>, attached: boolean): BatchHandle {
  let child: string | undefined;
  return {
    batchId: workflow.workflowId,
    attached,
    workflow,
    progress: async () => {
      const progress = await progressOf(client, workflow);
      child = progress.providerBatchWorkflow;
      return progress;
    },
    movement: {
      describe: async () => {
        const own = await workflow.describe();
        // Until its first window (or provider-batch route) has started, the batch has no count to show: a progress
        // query then (while it scans its file) is an action spent on nothing. So is one between its last window's end and
        // its finish (the finishing batch is worth a look).
        const working =
          (own.raw.pendingChildren?.length ?? 0) > 0 ||
          (own.raw.pendingActivities ?? []).some((activity) => activity.activityType?.name === FINISH_ACTIVITY);
        if (!working && own.status.name === 'RUNNING')
          return { runId: own.runId, historyLength: own.historyLength, preparing: true };
        const route =
          child === undefined
            ? undefined
            : await client.workflow
                .getHandle(child)
                .describe()
                .catch(() => undefined);
        return route
          ? { runId: `${own.runId}+${route.runId}`, historyLength: own.historyLength + route.historyLength }
          : own;
      },
    },
    cancel: async ({ wait = true } = {}) => {
      await workflow.cancel();
      if (!wait) return 'requested';
      return workflow.result().then(
        () => 'finished' as const,
        (error: unknown) =>
          error instanceof WorkflowFailedError && error.cause instanceof CancelledFailure ? 'cancelled' : 'failed',
      );
    },
    result: () => workflow.result(),
  };
}

async function exists(client: Client, batchId: string): Promise<boolean> {
  try {
    await client.workflow.getHandle<typeof batch>(batchId).describe();
    return true;
  } catch (error) {
    if ((error as { name?: string }).name === 'WorkflowNotFoundError') return false;
    throw error;
  }
}

function located(uri: string): string {
  return isRemote(uri) || uri.includes('://') ? uri : path.resolve(uri);
}

/**
 * Checks, before anything starts, that the sink can be written: not the source, not a directory, not already holding
 * results, and its directory (or bucket) exists and takes writes.
 */
async function checkSink(storage: ObjectStorage, source: string, sink: string): Promise<void> {
  const refuse = (message: string): never => {
    throw new InvalidInputError([{ path: sink, message }]);
  };
  if (sink === source) refuse('is the task file itself; choose another --out');
  try {
    if (await storage.isDirectory(sink)) refuse('is a directory; --out needs a file name, e.g. results.jsonl');
    if (((await storage.size(sink)) ?? 0) > 0)
      refuse('already holds results; resume that batch, or choose another --out');
    // Created and removed, not judged from permission bits, which say yes for /proc.
    await probeWritable(storage, sink);
  } catch (error) {
    // Any storage refusal (a parent that is a file, a missing directory or bucket, no permission) names the sink.
    if (error instanceof StorageError) refuse(`cannot be written (${error.message.slice(sink.length + 2)})`);
    throw error;
  }
}

/** What a `BatchClient` starts batches with (a `FanoutClient` passes its own). */
export interface BatchClientOptions {
  client: Client;
  /** The task queue batches run on. */
  taskQueue: string;
  /** Where task files are read and sinks written. */
  storage: ObjectStorage;
  /** The payload store's root (FANOUT_STORE): the answer cache's default location is under it. */
  storeRoot?: string;
  /** The id of a batch started without one. */
  newBatchId: () => string;
  /** Search attributes of a new batch, found by `name` (its id). */
  searchAttributes: (name: string) => Promise<object>;
}

/** Starts, resumes, reads and recovers batches; `FanoutClient`'s batch methods are these. */
/** A workflow's status name, undefined when there is no such workflow. */
function statusOf(handle: { describe(): Promise<{ status: { name: string } }> }): Promise<string | undefined> {
  return handle.describe().then(
    (description) => description.status.name,
    (error: unknown) => {
      if (error instanceof WorkflowNotFoundError) return undefined;
      throw error;
    },
  );
}

export class BatchClient {
  constructor(private readonly options: BatchClientOptions) {}

  /**
   * Starts a batch, or attaches to the batch of that id if there is one (running or finished), so a retried start
   * never runs a batch twice. The task file is validated, every line, before anything starts.
   */
  async start(request: StartBatchRequest): Promise<BatchHandle> {
    const { client, storage } = this.options;
    const batchId = checkWorkflowId(request.batchId ?? this.options.newBatchId(), 'the batch id');
    if (await exists(client, batchId)) return this.get(batchId);
    const input: BatchInput = validateBatchInput({
      batchId,
      source: located(request.source),
      sink: located(request.sink),
      ...(request.options === undefined ? {} : { options: request.options }),
    });
    refuseBudgetOnProviderBatch(input.options);
    const cache = await this.cacheOf(input.options);
    if (cache) input.options = { ...input.options, cache };
    const scan = await scanTaskSource(storage, input.source);
    const route = input.options?.route ?? 'sync';
    const providerBatch =
      route === 'provider-batch' ||
      (route === 'auto' &&
        !hasBudget(input.options) &&
        resolveAutoRoute(scan.tasks, input.options?.deadlineMs) === 'provider-batch');
    if (providerBatch && scan.firstAgentLine !== undefined)
      throw new InvalidInputError([
        {
          path: `${input.source} line ${scan.firstAgentLine}`,
          message: `an agent (a task with tools or an output schema) cannot go in a provider batch; use route "sync"`,
        },
      ]);
    await checkSink(storage, input.source, input.sink);
    try {
      const workflow = await client.workflow.start<typeof batch>('batch', {
        taskQueue: this.options.taskQueue,
        workflowId: batchId,
        args: [input],
        memo: { source: input.source, sink: input.sink, options: input.options ?? {} },
        staticSummary: `Batch of ${scan.tasks} agents, concurrency ${input.options?.concurrency ?? BATCH_DEFAULTS.concurrency}`,
        staticDetails: `Tasks: ${input.source}\nResults: ${input.sink}`,
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        workflowIdConflictPolicy: 'USE_EXISTING',
        ...(await this.options.searchAttributes(batchId)),
      });
      return toBatchHandle(client, workflow, false);
    } catch (error) {
      if (error instanceof WorkflowExecutionAlreadyStartedError) return this.get(batchId);
      throw error;
    }
  }

  /** The batch's answer cache resolved and checked (nothing starts if it is wrong). */
  private cacheOf(options: BatchOptions | undefined) {
    return resolveCacheSettings(options?.cache, {
      storage: this.options.storage,
      root: this.options.storeRoot ?? storeRootFromEnvironment(),
    });
  }

  /**
   * Resumes a finished, failed or cancelled batch: a new run of the same id that keeps the sink's ok lines and runs
   * only the failed and never-run items.
   */
  async resume(batchId: string, options?: BatchOptions): Promise<BatchHandle> {
    const { client } = this.options;
    const description = await client.workflow.getHandle<typeof batch>(batchId).describe();
    if (description.status.name === 'RUNNING')
      throw new InvalidInputError([{ path: batchId, message: 'is still running; cancel it before resuming' }]);
    const started = await this.startedAs(batchId, description.memo);
    const input = validateBatchInput({
      batchId,
      source: started.source,
      sink: started.sink,
      options: { ...started.options, ...options },
      resume: true,
    });
    refuseBudgetOnProviderBatch(input.options);
    const cache = await this.cacheOf(input.options);
    if (cache) input.options = { ...input.options, cache };
    await scanTaskSource(this.options.storage, input.source);
    const workflow = await client.workflow.start<typeof batch>('batch', {
      taskQueue: this.options.taskQueue,
      workflowId: batchId,
      args: [input],
      memo: { source: input.source, sink: input.sink, options: input.options ?? {} },
      staticSummary: `Resume of batch ${batchId}`,
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
    return toBatchHandle(client, workflow, false);
  }

  /**
   * Where a batch reads and writes, and its options: its memo, which this client sets; else the input its latest run
   * started with, so a batch any Temporal client started (the public contract is its input) can be resumed too.
   */
  private async startedAs(
    batchId: string,
    memo: Record<string, unknown> | undefined,
  ): Promise<{ source: string; sink: string; options?: BatchOptions }> {
    const given = memo as { source?: string; sink?: string; options?: BatchOptions } | undefined;
    if (given?.source && given.sink) return { source: given.source, sink: given.sink, options: given.options };
    const { workflow } = this.options.client;
    const history = await workflow.getHandle(batchId).fetchHistory();
    const payloads = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads;
    const input = payloads?.length
      ? await decodeFromPayloadsAtIndex<Partial<BatchInput>>(workflow.options.loadedDataConverter, 0, payloads)
      : undefined;
    if (typeof input?.source !== 'string' || typeof input.sink !== 'string')
      throw new InvalidInputError([
        { path: batchId, message: 'is not a batch: neither its memo nor its input names a source and a sink' },
      ]);
    return { source: input.source, sink: input.sink, options: input.options };
  }

  /** A handle on the batch of that id. */
  get(batchId: string): BatchHandle {
    return toBatchHandle(this.options.client, this.options.client.workflow.getHandle<typeof batch>(batchId), true);
  }

  /** The workflow's status once it is no longer running, or when `waitMs` have passed; undefined if there is none. */
  private async closedWithin(workflowId: string, waitMs: number): Promise<string | undefined> {
    const deadline = Date.now() + waitMs;
    const handle = this.options.client.workflow.getHandle(workflowId);
    for (;;) {
      const status = await statusOf(handle);
      if (status !== 'RUNNING' || Date.now() >= deadline) return status;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /**
   * Waits (at most a minute) until every window of a stopped batch has closed: Temporal asks a terminated batch's windows
   * to cancel, and their lanes then abort their calls and journal the answers they have. Read before that, the spool would
   * miss the last answers. With no worker running they cannot close: after the wait the spool is read as it is.
   */
  private async windowsClosed(batchId: string, firstRunId: string, options?: BatchOptions): Promise<void> {
    const deadline = Date.now() + 60_000;
    // A batch in stripes numbers stripe k's windows k, k + stripes, ...: one stripe may have ended before another's next
    // window, so the look goes on past as many windows in a row that never ran as the stripes its options asked for.
    const stripes = stripesWanted(options);
    for (let window = 0, missing = 0; missing < stripes; window += 1) {
      const handle = this.options.client.workflow.getHandle(windowWorkflowId(batchId, firstRunId, window));
      for (;;) {
        const status = await statusOf(handle);
        if (status === undefined) {
          missing += 1;
          break;
        }
        missing = 0;
        if (status !== 'RUNNING' || Date.now() >= deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  }

  /**
   * A batch terminated or timed out from outside never ran its own clean-up: this writes the results it had flushed
   * into its sink and removes its spool. Returns the sink's size, or undefined when there was nothing to recover.
   */
  async recoverStopped(batchId: string): Promise<{ sink: string; bytes: number } | undefined> {
    const description = await this.options.client.workflow.getHandle<typeof batch>(batchId).describe();
    if (description.status.name !== 'TERMINATED' && description.status.name !== 'TIMED_OUT') return undefined;
    const firstRunId = description.raw.workflowExecutionInfo?.firstRunId;
    if (!firstRunId) return undefined;
    const started = await this.startedAs(batchId, description.memo).catch((error: unknown) => {
      if (error instanceof InvalidInputError) return undefined;
      throw error;
    });
    if (started === undefined) return undefined;
    const { sink, options } = started;
    await this.windowsClosed(batchId, firstRunId, options);
    // The provider-batch route, asked to cancel, cancels its provider batches and collects what they answered into the
    // spool: read (and removed) before it has, those answers would be lost, and paid again by a resume.
    const route = providerBatchWorkflowId(batchId, firstRunId);
    if ((await this.closedWithin(route, 60_000)) === 'RUNNING')
      throw new Error(
        `batch ${batchId} was stopped, but its provider-batch route (workflow ${route}) is still collecting what its provider batches answered; its results are written once it has closed: ask again then`,
      );
    const bytes = await assembleLeftover(this.options.storage, sink, spoolOf(sink, firstRunId));
    return bytes === undefined ? undefined : { sink, bytes };
  }
}

/** A provider-batch route with a budget is refused before anything starts (PROVIDER_BATCH_BUDGET_REFUSAL says why). */
function refuseBudgetOnProviderBatch(options: BatchOptions | undefined): void {
  if (options?.route === 'provider-batch' && hasBudget(options))
    throw new InvalidInputError([{ path: 'options.route', message: PROVIDER_BATCH_BUDGET_REFUSAL }]);
}
