import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { dataConverterFromEnvironment } from '../codec';
import { tracingClientInterceptor } from './tracing-interceptor';
import type { AgentTask } from '../contract/agent-task';
import type { FanOutOptions, FanOutResult } from '../contract/fan-out';
import { validateFanOutInput } from '../contract/validation';
import { resolveCacheSettings, withCache } from './cache-settings';
import {
  taskQueueFromEnvironment,
  temporalConnectionFromEnvironment,
  type TemporalConnectionConfig,
} from '../config/environment';
import type { BatchOptions } from '../contract/batch';
import type { DagNode, DagResult, FanOutFanInResult, Synthesis } from '../contract/dag';
import { validateDagInput, validateFanOutFanInInput } from '../contract/validation';
import { FANOUT_NAME } from '../contract/search-attributes';
// Types only: the client starts workflows by name and never loads workflow code.
import type { dag } from '../workflows/dag';
import type { fanOut } from '../workflows/fan-out';
import type { fanOutFanIn } from '../workflows/fan-out-fan-in';
import { openConnection } from '../config/open-connection';
import { storeFromEnvironment, type PayloadStore } from '../store';
import { BatchClient, type BatchHandle, type StartBatchRequest } from './batch-client';
import { checkInputSize, offloadLargePrompts } from './payloads';
import { toHandle, type RunHandle } from './run-handle';
import { checkWorkflowId } from './workflow-id';

// The handle is part of this client's surface: its users import it from here.
export type { RunDescription, RunHandle } from './run-handle';

/** What the client calls runs, and how many it lists, when the caller says nothing. */
export const FANOUT_CLIENT_DEFAULTS = {
  /** A run's workflow id is `<prefix>-<8 random hex digits>`, the prefix by workflow type. */
  workflowIdPrefix: { fanOut: 'fanout', dag: 'dag', fanOutFanIn: 'fanin', batch: 'batch' },
  /** Runs `listRuns` returns. */
  listLimit: 20,
} as const;

/** Where and how to start runs. Every field has an environment fallback. */
export interface FanoutClientOptions {
  /** An existing client (its connection stays yours to close). Default: one made from `temporal`. */
  client?: Client;
  /** Default from TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / TEMPORAL_API_KEY. */
  temporal?: Partial<TemporalConnectionConfig>;
  /** Env FANOUT_TASK_QUEUE; default "fanout". */
  taskQueue?: string;
  /**
   * Payload codecs etc. of a client made here; default payload encryption when FANOUT_ENCRYPTION_KEYS (or
   * FANOUT_ENCRYPTION_KEY) is set, else the SDK's. Must match the workers'. Ignored with `client`.
   */
  dataConverter?: DataConverter;
  /** The claim-check store large prompts go to and large outputs are read from; default FANOUT_STORE. */
  store?: PayloadStore;
}

/** Per-run start options. */
export interface StartRunOptions {
  /** Workflow id; default `fanout-<random>`. Starting an id that is already running fails. */
  workflowId?: string;
  /** One line shown for the run in the Temporal UI; default "Fan-out of N agents". */
  summary?: string;
  /** A name to find the run by (search attribute FanoutName, when the namespace has it); default the workflow id. */
  name?: string;
}

/** A started fan-out. */
export type FanOutHandle = RunHandle<FanOutResult>;

/** One run in a listing. */
export interface RunListing {
  workflowId: string;
  type: string;
  /** The execution status by name, as in `RunDescription`. */
  status: string;
  startTime: Date;
}

/** What `FanoutClient.listRuns` lists. */
export interface ListRunsOptions {
  /** Most runs to return; default `FANOUT_CLIENT_DEFAULTS.listLimit` (20). */
  limit?: number;
  /** Only runs started with this name (search attribute FanoutName; check `hasNameAttribute()` first). */
  name?: string;
}

/** The workflow types a run can have; `listRuns` lists these. */
export const RUN_TYPES = ['fanOut', 'dag', 'fanOutFanIn', 'batch'] as const;

export function newRunId(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/**
 * Typed access to fan-out runs over one Temporal connection.
 *
 * @example
 * const fanout = await FanoutClient.connect();
 * const { results } = await fanout.runParallel([{ id: 'a', prompt: 'Hi' }, { id: 'b', prompt: 'Yo' }]);
 * await fanout.close();
 */
export class FanoutClient {
  private readonly batches: BatchClient;

  private constructor(
    readonly client: Client,
    readonly taskQueue: string,
    private readonly ownedConnection: Connection | undefined,
    readonly store: PayloadStore,
  ) {
    this.batches = new BatchClient({
      client,
      taskQueue,
      storage: store.storage,
      storeRoot: store.root,
      newBatchId: () => newRunId(FANOUT_CLIENT_DEFAULTS.workflowIdPrefix.batch),
      searchAttributes: (name) => this.searchAttributesFor(name),
    });
  }

  static async connect(options: FanoutClientOptions = {}): Promise<FanoutClient> {
    const taskQueue = options.taskQueue ?? taskQueueFromEnvironment();
    const store = options.store ?? storeFromEnvironment().store;
    if (options.client) return new FanoutClient(options.client, taskQueue, undefined, store);
    const config = { ...temporalConnectionFromEnvironment(), ...options.temporal };
    const dataConverter = options.dataConverter ?? dataConverterFromEnvironment();
    const connection = await openConnection((connectOptions) => Connection.connect(connectOptions), config);
    const client = new Client({
      connection,
      namespace: config.namespace,
      ...(dataConverter === undefined ? {} : { dataConverter }),
      // A run's trace starts here, under the caller's active span if it has one (tracing-interceptor.ts).
      interceptors: { workflow: [tracingClientInterceptor()] },
    });
    return new FanoutClient(client, taskQueue, connection, store);
  }

  private nameAttribute: Promise<boolean> | undefined;

  /** Whether the namespace has the FanoutName search attribute (asked once; runs start without it otherwise). */
  hasNameAttribute(): Promise<boolean> {
    this.nameAttribute ??= this.client.connection.operatorService
      .listSearchAttributes({ namespace: this.namespace })
      .then((response) => FANOUT_NAME.name in (response.customAttributes ?? {}))
      .catch(() => false);
    return this.nameAttribute;
  }

  /** Search attributes for a new run, if the namespace supports them. */
  async searchAttributesFor(
    name: string,
  ): Promise<{ typedSearchAttributes?: [{ key: typeof FANOUT_NAME; value: string }] }> {
    return (await this.hasNameAttribute()) ? { typedSearchAttributes: [{ key: FANOUT_NAME, value: name }] } : {};
  }

  get namespace(): string {
    return this.client.options.namespace;
  }

  /**
   * Validates and starts a fan-out. Bad input throws InvalidInputError before anything is started.
   */
  async startParallel(tasks: AgentTask[], options?: FanOutOptions, start: StartRunOptions = {}): Promise<FanOutHandle> {
    const validated = await this.withRunCache(
      validateFanOutInput({ tasks, ...(options === undefined ? {} : { options }) }),
    );
    const workflowId = checkWorkflowId(start.workflowId ?? newRunId(FANOUT_CLIENT_DEFAULTS.workflowIdPrefix.fanOut));
    const input = { ...validated, tasks: await offloadLargePrompts(validated.tasks, workflowId, this.store) };
    checkInputSize(input, 'the tasks');
    const names = input.tasks.map((task) => task.name ?? task.id);
    const workflow = await this.client.workflow.start<typeof fanOut>('fanOut', {
      ...(await this.runStart(workflowId, start.summary ?? `Fan-out of ${input.tasks.length} agents`, start.name)),
      args: [input],
      staticDetails: `Agents: ${names.slice(0, 50).join(', ')}${names.length > 50 ? ', …' : ''}`,
    });
    return toHandle(workflow, this.store, workflow.firstExecutionRunId);
  }

  /** Validates and starts a DAG (`dependsOn` edges; cycles and unknown ids are refused before anything starts). */
  async startDag(
    nodes: DagNode[],
    options?: FanOutOptions,
    start: StartRunOptions = {},
  ): Promise<RunHandle<DagResult>> {
    const checked = validateDagInput({ nodes, ...(options === undefined ? {} : { options }) });
    const cache = await resolveCacheSettings(checked.options?.cache, this.store);
    const validated = cache
      ? { ...checked, nodes: withCache(checked.nodes, cache), options: { ...checked.options, cache } }
      : checked;
    const workflowId = checkWorkflowId(start.workflowId ?? newRunId(FANOUT_CLIENT_DEFAULTS.workflowIdPrefix.dag));
    const input = { ...validated, nodes: await offloadLargePrompts(validated.nodes, workflowId, this.store) };
    checkInputSize(input, 'the nodes');
    const workflow = await this.client.workflow.start<typeof dag>('dag', {
      ...(await this.runStart(workflowId, start.summary ?? `DAG of ${nodes.length} agents`, start.name)),
      args: [input],
    });
    return toHandle(workflow, this.store, workflow.firstExecutionRunId);
  }

  /** Validates and starts a fan-out followed by a synthesis agent over all of its outputs. */
  async startFanOutFanIn(
    tasks: AgentTask[],
    synthesis: Synthesis | undefined,
    options?: FanOutOptions,
    start: StartRunOptions = {},
  ): Promise<RunHandle<FanOutFanInResult>> {
    // The synthesis call is not cached: its prompt is the fan-out's answers, which the workflow puts together.
    const validated = await this.withRunCache(
      validateFanOutFanInInput({
        tasks,
        ...(synthesis ? { synthesis } : {}),
        ...(options === undefined ? {} : { options }),
      }),
    );
    const workflowId = checkWorkflowId(
      start.workflowId ?? newRunId(FANOUT_CLIENT_DEFAULTS.workflowIdPrefix.fanOutFanIn),
    );
    const input = { ...validated, tasks: await offloadLargePrompts(validated.tasks, workflowId, this.store) };
    checkInputSize(input, 'the tasks');
    const workflow = await this.client.workflow.start<typeof fanOutFanIn>('fanOutFanIn', {
      ...(await this.runStart(
        workflowId,
        start.summary ?? `Fan-out of ${tasks.length} agents, then a synthesis`,
        start.name,
      )),
      args: [input],
    });
    return toHandle(workflow, this.store, workflow.firstExecutionRunId);
  }

  /** The run's answer cache resolved and checked (nothing starts if it is wrong), and put on each of its tasks. */
  private async withRunCache<I extends { tasks: AgentTask[]; options?: FanOutOptions }>(input: I): Promise<I> {
    const cache = await resolveCacheSettings(input.options?.cache, this.store);
    return cache ? { ...input, tasks: withCache(input.tasks, cache), options: { ...input.options, cache } } : input;
  }

  /** Start options every run shares: this client's task queue, the id, the UI summary and the name to find it by. */
  private async runStart(workflowId: string, summary: string, name?: string) {
    return {
      taskQueue: this.taskQueue,
      workflowId,
      staticSummary: summary,
      ...(await this.searchAttributesFor(name ?? workflowId)),
    };
  }

  /** Starts a fan-out and waits for it: every result in input order, and the run's metrics. */
  async runParallel(tasks: AgentTask[], options?: FanOutOptions, start?: StartRunOptions): Promise<FanOutResult> {
    const handle = await this.startParallel(tasks, options, start);
    return handle.result();
  }

  /** A handle on an existing run (a fan-out unless told otherwise: `getHandle<DagResult>(id)`). */
  getHandle<R = FanOutResult>(workflowId: string): RunHandle<R> {
    // The caller names the result type of a run it knows only by id.
    return toHandle(this.client.workflow.getHandle<() => Promise<R>>(workflowId), this.store);
  }

  /** Recent runs of every type, newest first. */
  async listRuns(options: ListRunsOptions = {}): Promise<RunListing[]> {
    const limit = options.limit ?? FANOUT_CLIENT_DEFAULTS.listLimit;
    const types = `(${RUN_TYPES.map((type) => `WorkflowType = '${type}'`).join(' OR ')})`;
    const query =
      options.name === undefined ? types : `${types} AND FanoutName = '${options.name.replace(/'/g, "\\'")}'`;
    const runs: RunListing[] = [];
    for await (const execution of this.client.workflow.list({ query, pageSize: options.limit })) {
      runs.push({
        workflowId: execution.workflowId,
        type: execution.type,
        status: execution.status.name,
        startTime: execution.startTime,
      });
      if (runs.length >= limit) break;
    }
    return runs;
  }

  /** Starts a batch over a JSONL file, or attaches to the batch of that id if one exists. */
  startBatch(request: StartBatchRequest): Promise<BatchHandle> {
    return this.batches.start(request);
  }

  /** Re-runs the failed and never-run items of a finished or cancelled batch. */
  resumeBatch(batchId: string, options?: BatchOptions): Promise<BatchHandle> {
    return this.batches.resume(batchId, options);
  }

  /** For a terminated or timed-out batch: writes the results it had flushed into its sink and removes its spool. */
  recoverStoppedBatch(batchId: string): Promise<{ sink: string; bytes: number } | undefined> {
    return this.batches.recoverStopped(batchId);
  }

  /** A handle on the batch of that id. */
  getBatch(batchId: string): BatchHandle {
    return this.batches.get(batchId);
  }

  /** Closes the connection if this client opened it. */
  async close(): Promise<void> {
    await this.ownedConnection?.close();
  }
}

/**
 * One call: starts a fan-out, waits for it, and closes the connection it opened.
 *
 * @example
 * const { results, metrics } = await runParallel([
 *   { id: 'researcher', system: 'You research.', prompt: 'Top 5 async frameworks?' },
 *   { id: 'coder', system: 'You write code.', prompt: 'A basic async HTTP client' },
 * ], { maxParallel: 10 });
 */
export async function runParallel(
  tasks: AgentTask[],
  options?: FanOutOptions,
  clientOptions?: FanoutClientOptions & StartRunOptions,
): Promise<FanOutResult> {
  const fanout = await FanoutClient.connect(clientOptions);
  try {
    return await fanout.runParallel(tasks, options, clientOptions);
  } finally {
    await fanout.close();
  }
}

/** Starts a fan-out and returns its handle; `close()` the returned client when done with it. */
export async function startParallel(
  tasks: AgentTask[],
  options?: FanOutOptions,
  clientOptions?: FanoutClientOptions & StartRunOptions,
): Promise<FanOutHandle & { close(): Promise<void> }> {
  const fanout = await FanoutClient.connect(clientOptions);
  try {
    const handle = await fanout.startParallel(tasks, options, clientOptions);
    return { ...handle, close: () => fanout.close() };
  } catch (error) {
    await fanout.close();
    throw error;
  }
}
