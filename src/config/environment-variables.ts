/**
 * Every environment variable the project reads, by what reads it. README's tables document each of them except the
 * `internal` ones, and test/environment-variables.test.ts holds README, this list and the source to each other: a
 * variable the source reads that is missing here, or one here that README lacks (or the reverse), fails it.
 */
export const ENVIRONMENT_VARIABLES = {
  /** Read by name in src/. */
  source: [
    'TEMPORAL_UI_URL',
    'FANOUT_TASK_QUEUE',
    // The names used before envconfig, mapped to its names (config/environment.ts).
    'TEMPORAL_TLS_CERT_PATH',
    'TEMPORAL_TLS_KEY_PATH',
    'OPENAI_API_KEY',
    'OPENAI_BASE_URL',
    'FANOUT_SIMULATOR_URL',
    'FANOUT_MODEL',
    'FANOUT_PRICES_FILE',
    'FANOUT_PRICES',
    'FANOUT_MCP_SERVERS',
    'FANOUT_TOOLS',
    'FANOUT_ENCRYPTION_KEYS',
    'FANOUT_ENCRYPTION_KEY',
    'FANOUT_ENCRYPTION_KEY_ID',
    'FANOUT_STORE',
    'FANOUT_STORE_FAULT_RATE',
    'FANOUT_STORE_FAULT_SEED',
    'FANOUT_CACHE',
    'FANOUT_CACHE_STORE',
    'FANOUT_CACHE_TTL',
    'FANOUT_CACHE_HOLD_AFTER_WRITE_MS',
    'FANOUT_S3_ENDPOINT',
    'FANOUT_S3_FORCE_PATH_STYLE',
    'FANOUT_S3_REQUEST_TIMEOUT_MS',
    'AWS_ACCESS_KEY_ID',
    'AWS_SECRET_ACCESS_KEY',
    'AWS_SESSION_TOKEN',
    'AWS_REGION',
    'AWS_DEFAULT_REGION',
    'FANOUT_MAX_CONCURRENT_ACTIVITIES',
    'FANOUT_ACTIVITY_POLLERS',
    'FANOUT_GRPC_COMPRESSION',
    'FANOUT_EAGER_ACTIVITIES',
    'FANOUT_WORKER_ACTIVITIES_PER_SECOND',
    'FANOUT_TASK_QUEUE_ACTIVITIES_PER_SECOND',
    'FANOUT_HEARTBEAT_THROTTLE_MS',
    'FANOUT_WORKFLOW_BUNDLE',
    'FANOUT_WORKER_IDENTITY',
    'FANOUT_SHUTDOWN_GRACE_MS',
    'FANOUT_WORKER_HEAP_MB',
    'FANOUT_MAX_CACHED_WORKFLOWS',
    'FANOUT_STICKY_QUEUE_TIMEOUT_MS',
    'FANOUT_WORKFLOW_STACK_FRAMES',
    'NODE_OPTIONS',
    'FANOUT_HEALTH_PORT',
    'FANOUT_HEALTH_HOST',
    'FANOUT_METRICS_PORT',
    'FANOUT_METRICS_HOST',
    'FANOUT_LOG_LEVEL',
    'FANOUT_PACING',
    'FANOUT_PACING_HEADROOM',
    'FANOUT_PACING_MAX_CONCURRENCY',
    'FANOUT_PACING_PROBE_CONCURRENCY',
    'FANOUT_PACING_COMPLETION_TOKENS',
    'FANOUT_RATE_LIMIT_WAIT_MS',
    'FANOUT_PROMPT_CACHE_KEY',
    'FANOUT_WATCH_INTERVAL_MS',
    'FANOUT_LOST_WORKER_MS',
    'FANOUT_SWEEP_INTERVAL_MS',
    'FANOUT_SIM_BATCH_SPEED',
    'FANOUT_SIM_PROMPT_CACHE_IDLE_MS',
    'POSTGRES_BIN_DIR',
    // Tracing (src/telemetry/): any OTEL_* turns it on; these are the ones fanout reads itself.
    'OTEL_SDK_DISABLED',
    'OTEL_TRACES_EXPORTER',
    'OTEL_EXPORTER_OTLP_PROTOCOL',
    'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
    'OTEL_EXPORTER_OTLP_TIMEOUT',
    'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT',
    'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT',
    'FANOUT_OTEL_FLUSH_MS',
    'FANOUT_OTEL_BATCH_ITEM_RATIO',
  ],
  /** Read by OpenTelemetry's SDK and OTLP exporter (src/telemetry/ starts them when an OTEL_* variable is set). */
  openTelemetrySdk: [
    'OTEL_EXPORTER_OTLP_ENDPOINT',
    'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    'OTEL_EXPORTER_OTLP_HEADERS',
    'OTEL_SERVICE_NAME',
    'OTEL_RESOURCE_ATTRIBUTES',
    'OTEL_TRACES_SAMPLER',
    'OTEL_TRACES_SAMPLER_ARG',
    'OTEL_BSP_MAX_QUEUE_SIZE',
    'OTEL_BSP_MAX_EXPORT_BATCH_SIZE',
    'OTEL_BSP_SCHEDULE_DELAY',
  ],
  /** Read by Temporal's envconfig (`@temporalio/envconfig`) from the environment config/environment.ts hands it. */
  envconfig: [
    'TEMPORAL_ADDRESS',
    'TEMPORAL_NAMESPACE',
    'TEMPORAL_API_KEY',
    'TEMPORAL_TLS',
    'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
    'TEMPORAL_TLS_SERVER_NAME',
    'TEMPORAL_TLS_CLIENT_CERT_PATH',
    'TEMPORAL_TLS_CLIENT_KEY_PATH',
    'TEMPORAL_CONFIG_FILE',
    'TEMPORAL_PROFILE',
  ],
  /** Read by the AWS SDK's own configuration chain (the S3 store). */
  awsSdk: ['AWS_PROFILE', 'AWS_ENDPOINT_URL_S3'],
  /**
   * Read by the Anthropic SDK (`@anthropic-ai/sdk`), which `claude-*` models go through (sync calls and provider
   * batches), and by `anthropicFromEnvironment` (src/llm/llm-client.ts), which passes them to it.
   */
  anthropicSdk: ['ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL'],
  /** Read by scripts/ (which src/local runs to find or build the servers). */
  scripts: [
    'TEMPORAL_CLI',
    'TEMPORAL_CLI_VERSION',
    'TEMPORAL_SERVER_HOME',
    'TEMPORAL_SERVER_VERSION',
    'SEAWEEDFS_WEED',
    'SEAWEEDFS_VERSION',
    'JAEGER_BIN',
    'JAEGER_VERSION',
  ],
  /** Read by the tests only. */
  tests: [
    'CHROMIUM_PATH',
    'REFRESH_DOCS_SCREENSHOTS',
    'FANOUT_TEST_SIM_URL',
    'FANOUT_FAULT_SEED',
    'FANOUT_FAULT_RUNS',
    'FANOUT_FAULT_FIXED',
    'FANOUT_TEST_OTLP_RECORD',
  ],
  /** Read by bench/ only. */
  bench: [
    'BENCH_ROUNDS',
    'BENCH_BATCH_ITEMS',
    'BENCH_WORKER_NODE_ARGS',
    'BENCH_WORKER_NODE_OPTIONS',
    'BENCH_PLAIN_NODE_ARGS',
    'PLAIN_JOURNAL_DIR',
    'HEAP_SAMPLE_DIR',
    'BENCH_STORE_ITEMS',
    'BENCH_STORE_ROUNDS',
    'BENCH_PACING_ITEMS',
    'BENCH_PACING_WORKERS',
    'BENCH_ECONOMICS_PARTS',
    'BENCH_ECONOMICS_ONLY',
    'BENCH_AGENT_STEPS',
    'BENCH_AGENT_PAGE_WORDS',
    'BENCH_TRACING_ITEMS',
    'BENCH_TRACING_MODES',
    'BENCH_TRACING_PROFILE',
    'BENCH_TRACING_BEFORE',
    'BENCH_TRACING_BEFORE_BUNDLE',
    'BENCH_TRACING_REPLAY_COPIES',
    'BENCH_ACTIONS_ITEMS',
    'BENCH_ACTIONS_CALL_MS',
    'BENCH_ACTIONS_ROUNDS',
  ],
  /** Not for users to set, so not in README: the code sets them for itself, or they are the system's own. */
  internal: [
    // `fanout worker` marks the child it re-launched with a heap cap (cli/heap-cap.ts).
    'FANOUT_HEAP_CAPPED',
    'FANOUT_HEAP_SEMI_SPACE',
    // Set by the S3 store before the AWS SDK loads, to keep its Node version notice off the output.
    'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED',
    'PATH',
    'XDG_DATA_HOME',
  ],
} as const;

/** Where a variable is read: a key of `ENVIRONMENT_VARIABLES`. */
export type VariableReader = keyof typeof ENVIRONMENT_VARIABLES;

/** The name of a variable the project reads. */
export type EnvironmentVariableName = (typeof ENVIRONMENT_VARIABLES)[VariableReader][number];
