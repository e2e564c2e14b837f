export { FanoutClient, runParallel, startParallel } from './client/fanout-client';
export type { FanOutHandle, FanoutClientOptions, RunHandle, StartRunOptions } from './client/fanout-client';
export type { BatchHandle, StartBatchRequest } from './client/batch-client';
export { readRunFile } from './client/task-file';
export type { RunFile } from './client/task-file';
export { parallelGroups, criticalPath, findCycle } from './contract/graph';
export type {
  DagInput,
  DagNode,
  DagResult,
  FanOutFanInInput,
  FanOutFanInResult,
  Synthesis,
  CriticalPath,
} from './contract/dag';
export type { BatchInput, BatchOptions, BatchProgress, BatchSummary, BatchResultLine } from './contract/batch';
export { readTaskFile } from './client/task-file';
export type { TaskFile } from './client/task-file';
export { createFanoutWorker, connectWorker, FANOUT_WORKER_DEFAULTS } from './worker';
export {
  EncryptionCodec,
  codecFromEnvironment,
  dataConverterFromEnvironment,
  encryptionKeysFromEnvironment,
  startCodecServer,
} from './codec';
export type { CodecServer, CodecServerOptions, EncryptionKey } from './codec';
export type { FanoutWorkerOptions } from './worker';
export { startHealthServer } from './worker-health';
export type { HealthServer, HealthServerOptions } from './worker-health';
export {
  agentMetricsInterceptor,
  AgentMetricName,
  installPrometheusRuntime,
  metricsEndpointFromEnvironment,
  prometheusRuntimeOptions,
} from './metrics';
export type { AgentMetricsOptions, MetricsEndpoint } from './metrics';
export { createActivities } from './activities';
export { defineTool, ToolInputError } from './tools/define-tool';
export type { Tool, ToolContext, ToolDefinition } from './tools/define-tool';
export type { McpServerConfig } from './tools/mcp';
export { agentProgressQuery, approveUpdate } from './workflows/agent/messages';
export type {
  AgentEvent,
  AgentOutcome,
  AgentProgress,
  ApprovalDecision,
  PendingApproval,
} from './workflows/agent/types';
export { DEFAULT_MAX_STEPS } from './contract/agent-task';
export type { Activities, ActivityDependencies } from './activities';
export { createLlmClient, providerFromEnvironment } from './activities/llm-client';
export type { ChatClient, LlmClientOptions, ProviderConfig } from './activities/llm-client';
export { FailureType, NON_RETRYABLE_FAILURE_TYPES } from './contract/failure-types';
export {
  InvalidInputError,
  validateBatchInput,
  validateDagInput,
  validateFanOutFanInInput,
  validateFanOutInput,
} from './contract/validation';
export type { InputIssue } from './contract/validation';
export { computeMetrics } from './contract/metrics';
export type { RunMetrics } from './contract/metrics';
export { MAX_IN_FLIGHT_PER_RUN, MAX_TASKS_PER_FAN_OUT } from './contract/limits';
export type { AgentCallResult } from './contract/agent-call';
export type { AgentResult, AgentStatus, AgentTask, TokenUsage } from './contract/agent-task';
export type { FanOutInput, FanOutOptions, FanOutResult, RunProgress, StopReason, TaskState } from './contract/fan-out';
export type { ErrorPolicy, RetryOptions, RunOptions } from './contract/run-options';
// The dev server, the local stack and the simulator are in `temporal-fanout/local` (src/local/index.ts).
