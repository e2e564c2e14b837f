// The client: start runs and batches of LLM calls, follow them, read their task files.
export { FanoutClient, runParallel, startParallel } from './client/fanout-client';
export type { FanOutHandle, FanoutClientOptions, RunHandle, StartRunOptions } from './client/fanout-client';
export type { BatchCancelOutcome, BatchHandle, StartBatchRequest } from './client/batch-client';
export { readRunFile, readTaskFile } from './client/task-file';
export type { RunFile, TaskFile } from './client/task-file';

// What a run takes and returns: a fan-out, a DAG, a fan-out/fan-in, a batch, and their tasks.
export type { FanOutInput, FanOutOptions, FanOutResult, RunProgress, StopReason, TaskState } from './contract/fan-out';
export type { ErrorPolicy, RetryOptions, RunOptions } from './contract/run-options';
export type {
  DagInput,
  DagNode,
  DagResult,
  CriticalPath,
  FanOutFanInInput,
  FanOutFanInResult,
  Synthesis,
} from './contract/dag';
export { parallelGroups, criticalPath, findCycle } from './contract/graph';
export type { BatchInput, BatchOptions, BatchProgress, BatchSummary, BatchResultLine } from './contract/batch';
export { DEFAULT_MAX_STEPS } from './contract/agent-task-rules';
export type { AgentResult, AgentStatus, AgentTask } from './contract/agent-task';
export type { TokenUsage } from './contract/token-usage';
export type { AgentCallResult } from './contract/agent-call';
export { computeMetrics } from './contract/metrics';
export type { RunMetrics } from './contract/metrics';
export { MAX_IN_FLIGHT_PER_RUN, MAX_TASKS_PER_FAN_OUT } from './contract/limits';

// Checking a run's input before it starts, and the failure types a run's tasks end with.
export {
  InvalidInputError,
  validateBatchInput,
  validateDagInput,
  validateFanOutFanInInput,
  validateFanOutInput,
} from './contract/validation';
export type { InputIssue } from './contract/validation';
export { FailureType, NON_RETRYABLE_FAILURE_TYPES } from './contract/failure-types';

// The worker, its activities and the LLM client they call.
export { createFanoutWorker, connectWorker, FANOUT_WORKER_DEFAULTS } from './worker';
export { startTracingFromEnvironment, stopTracing } from './telemetry/lifecycle';
export type { FanoutWorkerOptions } from './worker';
export { startHealthServer } from './worker-health';
export type { HealthServer, HealthServerOptions } from './worker-health';
export { createActivities } from './activities';
export type { Activities, ActivityDependencies } from './activities';
export { createLlmClient, providerFromEnvironment } from './llm/llm-client';
export type { ChatClient, LlmClientOptions, ProviderConfig } from './llm/llm-client';

// Payload encryption: the codec workers and clients share, its keys, and the server the Temporal UI decodes through.
export {
  EncryptionCodec,
  codecFromEnvironment,
  dataConverterFromEnvironment,
  encryptionKeysFromEnvironment,
  startCodecServer,
} from './codec';
export type { CodecServer, CodecServerOptions, EncryptionKey } from './codec';

// The worker's metrics of agent calls (metrics/index.ts), and the Prometheus endpoint that serves them.
export {
  agentMetricsInterceptor,
  AgentMetricName,
  installPrometheusRuntime,
  metricsEndpointFromEnvironment,
  prometheusRuntimeOptions,
} from './metrics';
export type { AgentMetricsOptions, MetricsEndpoint } from './metrics';

// Agents: their tools (defined in code, or an MCP server's), progress query and approval update.
export { defineTool, ToolInputError } from './tools/define-tool';
export type { Tool, ToolContext, ToolDefinition } from './tools/define-tool';
export type { McpServerConfig } from './tools/mcp';
export { agentProgressQuery, approveUpdate } from './workflows/agent/messages';
export type { AgentEvent, AgentOutcome, AgentProgress, ApprovalDecision, PendingApproval } from './contract/agent-loop';

// The dev server, the local stack and the simulator are in `temporal-fanout/local` (src/local/index.ts).
