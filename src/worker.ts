import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { NativeConnection, Worker, type InjectedSinks, type WorkerOptions } from '@temporalio/worker';
import type { DataConverter } from '@temporalio/common';
import { createActivities, type ActivityDependencies } from './activities';
import type { Tool } from './tools/define-tool';
import type { McpServerConfig } from './tools/mcp';
import { closeToolsWhenStopped, toolRegistryFor } from './tools/worker-tools';
import { runningActivitiesInterceptor, superviseWorker, watchdogFor, type CallWatchdog } from './watchdog';
import { CALL_NOTICES_SINK, type CallNoticeSinks } from './contract/call-notices';
import { agentMetricsInterceptor } from './metrics';
import { openConnection } from './config/open-connection';
import { dataConverterFromEnvironment } from './codec';
import { startTracingFromEnvironment } from './telemetry/lifecycle';
import type { WorkerTracing } from './telemetry/worker-tracing';
import {
  countFromEnvironment,
  grpcCompressionFromEnvironment,
  integerFromEnvironment,
  numberFromEnvironment,
  taskQueueFromEnvironment,
  temporalConnectionFromEnvironment,
  type Environment,
  type TemporalConnectionConfig,
} from './config/environment';

/** What a worker uses where neither its options nor the environment say (`fanout worker --help` and README show them). */
export const FANOUT_WORKER_DEFAULTS = {
  /** Agent calls one worker runs at once (FANOUT_MAX_CONCURRENT_ACTIVITIES). */
  maxConcurrentActivities: 500,
  /** Most concurrent activity polls (FANOUT_ACTIVITY_POLLERS); never more than the slots. */
  activityPollers: 100,
  /** Activity polls the SDK's autoscaler starts from. */
  initialActivityPollers: 20,
  /** Longest wait between heartbeats reaching the server, ms (FANOUT_HEARTBEAT_THROTTLE_MS). */
  heartbeatThrottleMs: 2000,
  /** How long in-flight agent calls may finish after shutdown starts, ms (FANOUT_SHUTDOWN_GRACE_MS). */
  shutdownGraceMs: 30_000,
  /**
   * Workflows kept in memory between their workflow tasks (FANOUT_MAX_CACHED_WORKFLOWS): room for 2,000 agents at once
   * and the runs that started them. One that falls out replays its whole history at its next task: at 250, 2,000 agents
   * ran 70 x their ideal time. A cached agent holds about 0.1 MB of the workflow thread's heap (measured: 86 KB at its
   * first step, some 5 KB more a step), a fan-out about 1 MB; only workflows that are running stay cached, so the cache
   * costs memory only while they run. `fanout worker` sizes its workflow thread's heap cap for it (src/cli/heap-cap.ts).
   */
  maxCachedWorkflows: 2500,
  /**
   * How long a workflow task waits on this worker's own (sticky) queue before the server hands it to any worker, ms
   * (FANOUT_STICKY_QUEUE_TIMEOUT_MS): the SDK's default. It is what a lost worker's runs wait before another worker
   * takes them over, beside the replay that costs them.
   */
  stickyQueueTimeoutMs: 10_000,
  /**
   * Frames in a workflow's stack traces (FANOUT_WORKFLOW_STACK_FRAMES). The SDK takes a stack trace of every promise
   * workflow code makes, mapped through the bundle's source map, for the stack trace the Temporal UI shows: at V8's 10
   * frames that was about a fifth of a batch's workflow CPU (bench/tracing-replay.ts with a bundle cut to 5). Five keep
   * the SDK call a workflow waits in and the two project frames above it.
   */
  workflowStackFrames: 5,
} as const;

/** Options of a fan-out worker. Every field falls back to an environment variable, then a default. */
export interface FanoutWorkerOptions {
  /** An open connection; default: one made from `temporal`. */
  connection?: NativeConnection;
  /** Where Temporal is; default from TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / TEMPORAL_API_KEY. */
  temporal?: Partial<TemporalConnectionConfig>;
  /** Env FANOUT_TASK_QUEUE; default "fanout". */
  taskQueue?: string;
  /** Dependencies of the activities (LLM client, default model, clock). */
  activities?: ActivityDependencies;
  /**
   * Tools agents may call, made by `defineTool`. Env FANOUT_TOOLS: modules exporting them, comma-separated (what
   * `fanout worker --tools <module>` sets). Default none.
   */
  tools?: Tool[];
  /** MCP servers (stdio or Streamable HTTP) whose tools agents may call. Env FANOUT_MCP_SERVERS (JSON, or a file of it). Default none. */
  mcpServers?: McpServerConfig[];
  /**
   * Activity slots: agent calls one worker runs at once. Agent calls wait on the network, so a worker wants
   * hundreds, not the SDK's default 100. Env FANOUT_MAX_CONCURRENT_ACTIVITIES; default
   * `FANOUT_WORKER_DEFAULTS.maxConcurrentActivities` (500).
   */
  maxConcurrentActivities?: number;
  /**
   * Most concurrent activity polls; the SDK scales the number between 1 and this from the server's feedback, so a
   * burst of hundreds of scheduled agents is picked up quickly. Env FANOUT_ACTIVITY_POLLERS; default
   * `FANOUT_WORKER_DEFAULTS.activityPollers` (100).
   */
  activityPollers?: number;
  /**
   * Workflows this worker keeps in memory between their workflow tasks (the SDK's sticky cache). A workflow that falls
   * out of it is replayed from its whole history at its next task: an agent per workflow means hundreds running at
   * once, and the SDK's default, derived from the heap limit, is 60 under `fanout worker`'s capped heap (which gives
   * the workflow threads room for the cache: src/cli/heap-cap.ts). Env
   * FANOUT_MAX_CACHED_WORKFLOWS; default `FANOUT_WORKER_DEFAULTS.maxCachedWorkflows` (2,500).
   */
  maxCachedWorkflows?: number;
  /**
   * How long a workflow task waits for this worker on its sticky queue before the server hands it to any worker, ms: a
   * lost worker's runs wait this long for their next workflow task. Env FANOUT_STICKY_QUEUE_TIMEOUT_MS; default
   * `FANOUT_WORKER_DEFAULTS.stickyQueueTimeoutMs` (10000, the SDK's).
   */
  stickyQueueTimeoutMs?: number;
  /** Cap on agent calls this worker starts per second. Env FANOUT_WORKER_ACTIVITIES_PER_SECOND; default none. */
  maxActivitiesPerSecond?: number;
  /**
   * Cap on agent calls started per second across every worker of the task queue, enforced by the server.
   * Env FANOUT_TASK_QUEUE_ACTIVITIES_PER_SECOND; default none.
   */
  maxTaskQueueActivitiesPerSecond?: number;
  /**
   * Longest wait between heartbeats reaching the server, ms; it bounds how long a cancellation takes to reach
   * an in-flight call. Env FANOUT_HEARTBEAT_THROTTLE_MS; default `FANOUT_WORKER_DEFAULTS.heartbeatThrottleMs` (2000).
   */
  heartbeatThrottleMs?: number;
  /** A prebuilt workflow bundle (`npm run build` writes dist/workflow-bundle.js). Env FANOUT_WORKFLOW_BUNDLE. */
  workflowBundlePath?: string;
  /**
   * Frames kept in a workflow's stack traces, from 1 to 100 (the prebuilt bundle's workflows; V8's own is 10): the SDK
   * takes one for every promise workflow code makes. Env FANOUT_WORKFLOW_STACK_FRAMES; default
   * `FANOUT_WORKER_DEFAULTS.workflowStackFrames` (5).
   */
  workflowStackFrames?: number;
  /**
   * Agent calls of one workflow task the server may hand straight back to this worker with its completion (eager
   * dispatch; the worker's free slots bound it, and batches never use it). Env FANOUT_EAGER_ACTIVITIES; 0 turns it off;
   * default `maxConcurrentActivities`. Needs `system.enableActivityEagerExecution` on the server (the dev server sets it).
   */
  maxEagerActivityReservationsPerWorkflowTask?: number;
  /** Env FANOUT_WORKER_IDENTITY; default the SDK's pid@host. */
  identity?: string;
  /**
   * After shutdown starts (SIGTERM, `worker.shutdown()`), how long in-flight agent calls may run on before they are
   * cancelled, ms; a cancelled call costs an attempt and is retried on another worker. Env FANOUT_SHUTDOWN_GRACE_MS;
   * default `FANOUT_WORKER_DEFAULTS.shutdownGraceMs` (30000): most chat completions finish well within it, and it matches Kubernetes' default
   * terminationGracePeriodSeconds. Give the platform's kill timeout a few seconds more than this (docker-compose.yml
   * sets stop_grace_period), or the process is killed mid-call and the calls wait for their heartbeat timeout instead.
   * A worker whose server does not answer stops anyway: `run()` rejects SHUTDOWN_FORCE_MARGIN_MS after the grace
   * (`workerOptions.shutdownForceTime` to change), and `fanout worker` exits a little after that whatever is left.
   */
  shutdownGraceMs?: number;
  /**
   * Any other SDK WorkerOptions (interceptors, tuner, sinks, shutdownForceTime, workerDeploymentOptions, plugins ...),
   * passed through as they are. Merged last: a field here wins over what the options above and the environment give
   * (`shutdownGraceTime` over `shutdownGraceMs`, `activities` replaces the agent activities). A `tuner` replaces
   * `maxConcurrentActivities`, and `workflowBundle`/`workflowsPath` replace the prebuilt bundle, as the SDK allows only one.
   * `interceptors.activity` are added to the agent-call metrics interceptor rather than replacing it.
   */
  workerOptions?: Partial<WorkerOptions>;
  /**
   * Payload codecs etc.; default payload encryption when FANOUT_ENCRYPTION_KEYS (or FANOUT_ENCRYPTION_KEY) is set, else
   * the SDK's. Codecs run outside the workflow sandbox, so the prebuilt bundle needs nothing of them.
   */
  dataConverter?: DataConverter;
}

/**
 * After the grace, cancelled calls report back to Temporal; when it does not answer (gone, unreachable) the SDK would
 * wait for it forever, so `run()` gives up this long after the grace (the SDK's `shutdownForceTime`) and rejects.
 */
export const SHUTDOWN_FORCE_MARGIN_MS = 3000;

/** Finds a prebuilt workflow bundle, so a worker starts in a second instead of bundling for several. */
function findWorkflowBundle(explicit: string | undefined, environment: Environment = process.env): string | undefined {
  const candidate = explicit ?? environment.FANOUT_WORKFLOW_BUNDLE;
  if (candidate) {
    if (!existsSync(candidate)) throw new Error(`workflow bundle not found: ${candidate}`);
    return candidate;
  }
  const beside = path.join(__dirname, 'workflow-bundle.js');
  return existsSync(beside) ? beside : undefined;
}

/**
 * The prebuilt bundle's code with its workflows' stack traces cut to `frames`: set at the top of the bundle's script,
 * before the SDK freezes the sandbox's globals, and on its first line, so that the source map's lines still hold.
 */
function bundleWithStackFrames(bundlePath: string, frames: number): { code: string } {
  if (!Number.isInteger(frames) || frames < 1 || frames > 100) {
    throw new Error(
      `workflow stack frames (FANOUT_WORKFLOW_STACK_FRAMES) must be a whole number from 1 to 100, got ${frames}`,
    );
  }
  return { code: `Error.stackTraceLimit = ${frames}; ${readFileSync(bundlePath, 'utf8')}` };
}

/**
 * With tracing on, the traced twin of a prebuilt bundle (its workflows make spans); a bundle without one is run as it
 * is, with a warning: its workflows and their activities make no spans of their own, and a run's trace has gaps.
 */
function tracedBundle(bundlePath: string | undefined, tracing: WorkerTracing | undefined): string | undefined {
  if (!tracing || !bundlePath) return bundlePath;
  const traced = tracing.tracedBundleOf(bundlePath);
  if (traced) return traced;
  console.warn(
    `tracing is on, but the workflow bundle ${bundlePath} has no traced twin beside it: workflows make no spans`,
  );
  return bundlePath;
}

/** FANOUT_WORKER_IDENTITY, else one unique per worker, even for a restarted container that gets the same pid and host. */
function workerIdentity(environment: Environment = process.env): string {
  return environment.FANOUT_WORKER_IDENTITY || `${process.pid}@${hostname()}/${randomUUID().slice(0, 8)}`;
}

/** The options without keys set to undefined, which the native layer rejects. */
function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/** Workflows a worker caches: FANOUT_MAX_CACHED_WORKFLOWS (0 or more), else `FANOUT_WORKER_DEFAULTS.maxCachedWorkflows`. */
export function maxCachedWorkflowsFromEnvironment(environment: Environment = process.env): number {
  return countFromEnvironment('FANOUT_MAX_CACHED_WORKFLOWS', environment) ?? FANOUT_WORKER_DEFAULTS.maxCachedWorkflows;
}

/**
 * How long in-flight agent calls may finish after shutdown starts, ms: FANOUT_SHUTDOWN_GRACE_MS (0 or more), else
 * `FANOUT_WORKER_DEFAULTS.shutdownGraceMs`. `fanout worker` reads it here too, for its own exit deadlines.
 */
export function shutdownGraceMsFromEnvironment(environment: Environment = process.env): number {
  return countFromEnvironment('FANOUT_SHUTDOWN_GRACE_MS', environment) ?? FANOUT_WORKER_DEFAULTS.shutdownGraceMs;
}

/**
 * The worker's tracing when an `OTEL_*` variable asks for it (src/telemetry/), else undefined: the OpenTelemetry SDK is
 * loaded only then.
 */
function tracingFromEnvironment(): WorkerTracing | undefined {
  const tracing = startTracingFromEnvironment();
  return (
    tracing &&
    (require('./telemetry/worker-tracing') as typeof import('./telemetry/worker-tracing')).workerTracing(tracing)
  );
}

/** Opens a worker connection from options and environment. */
export async function connectWorker(temporal: Partial<TemporalConnectionConfig> = {}): Promise<NativeConnection> {
  const config = { ...temporalConnectionFromEnvironment(), ...temporal };
  const codec = grpcCompressionFromEnvironment(config.address);
  return openConnection(
    (connectOptions) => NativeConnection.connect({ ...connectOptions, grpcCompression: { codec } }),
    config,
  );
}

/**
 * Creates a worker that runs the fan-out workflows and the agent activity. Call `run()` on it.
 *
 * @example
 * const worker = await createFanoutWorker({ maxConcurrentActivities: 300 });
 * await worker.run();
 */
export async function createFanoutWorker(options: FanoutWorkerOptions = {}): Promise<Worker> {
  const maxConcurrentActivities =
    options.maxConcurrentActivities ??
    integerFromEnvironment('FANOUT_MAX_CONCURRENT_ACTIVITIES') ??
    FANOUT_WORKER_DEFAULTS.maxConcurrentActivities;
  const activityPollers = Math.min(
    options.activityPollers ??
      integerFromEnvironment('FANOUT_ACTIVITY_POLLERS') ??
      FANOUT_WORKER_DEFAULTS.activityPollers,
    maxConcurrentActivities,
  );
  const connection = options.connection ?? (await connectWorker(options.temporal));
  const namespace = options.temporal?.namespace ?? temporalConnectionFromEnvironment().namespace;
  const tracing = tracingFromEnvironment();
  const bundlePath = tracedBundle(findWorkflowBundle(options.workflowBundlePath), tracing);
  // Peers judge lost workers by it.
  const identity = options.identity ?? workerIdentity();
  const dataConverter = options.dataConverter ?? dataConverterFromEnvironment();
  const maxActivitiesPerSecond =
    options.maxActivitiesPerSecond ?? numberFromEnvironment('FANOUT_WORKER_ACTIVITIES_PER_SECOND');
  const maxTaskQueueActivitiesPerSecond =
    options.maxTaskQueueActivitiesPerSecond ?? numberFromEnvironment('FANOUT_TASK_QUEUE_ACTIVITIES_PER_SECOND');
  const shutdownGraceMs = options.shutdownGraceMs ?? shutdownGraceMsFromEnvironment();
  // Eager dispatch: the agent calls a fan-out or DAG starts come back with the workflow task's completion, while this
  // worker has free slots, instead of each going through the server's matching and a poll. Batches opt out (their calls
  // should spread over every worker). Only where the server enables it (system.enableActivityEagerExecution).
  const eager =
    options.maxEagerActivityReservationsPerWorkflowTask ??
    countFromEnvironment('FANOUT_EAGER_ACTIVITIES') ??
    maxConcurrentActivities;
  const extra = definedOnly(options.workerOptions ?? {});
  const registry = options.activities?.tools ?? toolRegistryFor(options);
  const ownWorkflows = extra.workflowBundle !== undefined || extra.workflowsPath !== undefined;
  // Aborted as shutdown starts (SIGTERM, `worker.shutdown()`): batch lanes take no further item (ActivityDependencies).
  const stopping = new AbortController();
  options.activities?.stopping?.addEventListener('abort', () => stopping.abort(), { once: true });
  // What workflow code tells the watchdog about its calls (src/workflows/call-notices.ts), once the worker exists.
  let watchdog: CallWatchdog | undefined;
  const callNotices: InjectedSinks<CallNoticeSinks> = {
    [CALL_NOTICES_SINK]: {
      scheduled: { fn: (info, activityId) => watchdog?.hosted(info.workflowId, info.runId, activityId) },
      cancelRequested: { fn: (info) => watchdog?.cancelNotice(info.workflowId, info.runId) },
      finished: { fn: (info) => watchdog?.finished(info.workflowId, info.runId) },
    },
  };
  // A prebuilt bundle has the call-notices interceptor in it (scripts/bundle-workflows.js); one bundled here gets it too.
  const bundledHere = extra.workflowBundle === undefined && (extra.workflowsPath !== undefined || !bundlePath);
  // The native layer rejects keys that are present but undefined, so optional settings are spread in only when set.
  const worker = await Worker.create({
    connection,
    namespace,
    taskQueue: options.taskQueue ?? taskQueueFromEnvironment(),
    ...(identity === undefined ? {} : { identity }),
    ...(dataConverter === undefined ? {} : { dataConverter }),
    activities: createActivities({ ...options.activities, tools: registry, stopping: stopping.signal }),
    ...(ownWorkflows
      ? {}
      : bundlePath
        ? {
            workflowBundle: bundleWithStackFrames(
              bundlePath,
              options.workflowStackFrames ??
                integerFromEnvironment('FANOUT_WORKFLOW_STACK_FRAMES') ??
                FANOUT_WORKER_DEFAULTS.workflowStackFrames,
            ),
          }
        : { workflowsPath: require.resolve('./workflows') }),
    ...(extra.tuner === undefined ? { maxConcurrentActivityTaskExecutions: maxConcurrentActivities } : {}),
    activityTaskPollerBehavior: {
      type: 'autoscaling',
      maximum: activityPollers,
      initial: Math.min(FANOUT_WORKER_DEFAULTS.initialActivityPollers, activityPollers),
    },
    maxCachedWorkflows: options.maxCachedWorkflows ?? maxCachedWorkflowsFromEnvironment(),
    stickyQueueScheduleToStartTimeout:
      options.stickyQueueTimeoutMs ??
      integerFromEnvironment('FANOUT_STICKY_QUEUE_TIMEOUT_MS') ??
      FANOUT_WORKER_DEFAULTS.stickyQueueTimeoutMs,
    ...(maxActivitiesPerSecond === undefined ? {} : { maxActivitiesPerSecond }),
    ...(maxTaskQueueActivitiesPerSecond === undefined ? {} : { maxTaskQueueActivitiesPerSecond }),
    maxEagerActivityReservationsPerWorkflowTask: eager,
    maxHeartbeatThrottleInterval:
      options.heartbeatThrottleMs ??
      integerFromEnvironment('FANOUT_HEARTBEAT_THROTTLE_MS') ??
      FANOUT_WORKER_DEFAULTS.heartbeatThrottleMs,
    shutdownGraceTime: shutdownGraceMs,
    shutdownForceTime: shutdownGraceMs + SHUTDOWN_FORCE_MARGIN_MS,
    ...extra,
    sinks: { ...callNotices, ...tracing?.sinks, ...extra.sinks },
    // Merged, not replaced: the agent-call metrics (src/metrics/) wrap whatever activity interceptors the caller adds.
    interceptors: {
      ...extra.interceptors,
      activity: [
        // The trace's activity span first: the metrics interceptor and the call's own spans run inside it.
        ...(tracing ? [tracing.activity] : []),
        agentMetricsInterceptor({ defaultModel: options.activities?.defaultModel }),
        ...(extra.interceptors?.activity ?? []),
        // Innermost: what runs here, for the watchdog to tell a task it was handed but never ran (src/watchdog/).
        runningActivitiesInterceptor(),
      ],
      // A worker bundling from source bundles the OpenTelemetry workflow interceptors in (a prebuilt bundle has its
      // traced twin, tracedBundle).
      ...(bundledHere
        ? {
            workflowModules: [
              require.resolve('./workflows/call-notices'),
              ...(extra.interceptors?.workflowModules ?? []),
              ...(tracing && !bundlePath && !ownWorkflows ? [tracing.workflowModule] : []),
            ],
          }
        : {}),
    },
  });
  // Every way a shutdown starts calls the worker's own `shutdown` (the SDK's signal handler and its fatal-error path too).
  const shutdown = worker.shutdown.bind(worker);
  worker.shutdown = () => {
    stopping.abort();
    shutdown();
  };
  // Presence and the lost-worker sweep, for the worker's lifetime (src/watchdog/).
  superviseWorker(worker, worker.options.taskQueue, { tracksRunning: true });
  if (worker.client) watchdog = watchdogFor(worker.client);
  closeToolsWhenStopped(worker, registry);
  return worker;
}
