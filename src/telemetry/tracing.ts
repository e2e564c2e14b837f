import { OTLPTraceExporter as OtlpHttpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  NodeTracerProvider,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-node';
import { countFromEnvironment, type Environment } from '../config/environment';
import { ExportBreaker } from './export-breaker';
import { DEFAULT_FLUSH_MS, DEFAULT_SERVICE_NAME, tracingWanted } from './wanted';

/** The process's tracing, once started. */
export interface Tracing {
  readonly provider: NodeTracerProvider;
  readonly resource: Resource;
  /** Where the spans of workflow code (made in the sandbox, handed out through the SDK's sink) go. */
  readonly workflowSpans: SpanProcessor;
}

let started: Tracing | undefined;

/** FANOUT_OTEL_FLUSH_MS, else DEFAULT_FLUSH_MS. */
function flushMsFromEnvironment(environment: Environment = process.env): number {
  return countFromEnvironment('FANOUT_OTEL_FLUSH_MS', environment) ?? DEFAULT_FLUSH_MS;
}

/** The exporter OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL names: http/protobuf (default) or http/json. */
function exporterFromEnvironment(environment: Environment, shortLived: boolean): SpanExporter {
  const protocol = (
    environment.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ||
    environment.OTEL_EXPORTER_OTLP_PROTOCOL ||
    'http/protobuf'
  ).trim();
  // How long one export may take, retries included, before its spans are dropped: OTEL_EXPORTER_OTLP_TIMEOUT if set,
  // else the exporter's own 10 s in a long-lived process (a worker), whose exports run behind its calls and wait on
  // nothing: a collector slower than a second (Phoenix on a loaded machine answered in 1.0-1.03 s) must not lose the
  // spans a run ends with. A short-lived command bounds each export by the flush bound instead: the exporter retries a
  // refused connection with backoff until its timeout, and the retry timers would hold the command's exit.
  const userTimeout = environment.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT || environment.OTEL_EXPORTER_OTLP_TIMEOUT;
  const config = userTimeout || !shortLived ? {} : { timeoutMillis: flushMsFromEnvironment(environment) };
  if (protocol === 'http/protobuf') return new OtlpProtobufExporter(config);
  if (protocol === 'http/json') return new OtlpHttpJsonExporter(config);
  throw new Error(
    `OTEL_EXPORTER_OTLP_PROTOCOL is '${protocol}': temporal-fanout exports traces over http/protobuf (the default) or http/json`,
  );
}

/**
 * Workflow spans come out of the SDK's sink in the shape of OpenTelemetry 1.x (`parentSpanId`,
 * `instrumentationLibrary`); the 2.x exporters read `parentSpanContext` and `instrumentationScope`. Without this, a
 * workflow's spans would reach the collector as roots of no scope.
 */
function workflowSpanAdapter(next: SpanProcessor): SpanProcessor {
  return {
    onStart: () => undefined,
    onEnd: (span) => {
      const legacy = span as typeof span & {
        parentSpanId?: string;
        instrumentationLibrary?: { name: string; version?: string };
      };
      const context = span.spanContext();
      const adapted = Object.assign(Object.create(null) as object, span, {
        spanContext: () => context,
        instrumentationScope: span.instrumentationScope ?? legacy.instrumentationLibrary ?? { name: 'temporal' },
        parentSpanContext:
          span.parentSpanContext ??
          (legacy.parentSpanId
            ? { traceId: context.traceId, spanId: legacy.parentSpanId, traceFlags: context.traceFlags, isRemote: false }
            : undefined),
      }) as typeof span;
      next.onEnd(adapted);
    },
    forceFlush: () => next.forceFlush(),
    shutdown: () => Promise.resolve(),
  };
}

/** How a process that starts tracing lives: `shortLived` (a CLI command) bounds every export by the flush bound. */
export interface TracingStart {
  shortLived?: boolean;
}

/**
 * Starts tracing for this process when the environment asks for it (`tracingWanted`), once: a tracer provider
 * registered globally (so a caller's own active span is the parent of what fanout starts), its sampler from
 * OTEL_TRACES_SAMPLER / _ARG, its resource from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, and a batch span
 * processor (OTEL_BSP_*: bounded queue, spans dropped when it is full, never a call held up) in front of an OTLP
 * exporter (OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _TIMEOUT). Returns undefined when tracing is off.
 */
export function startTracing(
  environment: Environment = process.env,
  { shortLived = false }: TracingStart = {},
): Tracing | undefined {
  if (started) return started;
  if (!tracingWanted(environment)) return undefined;
  const exporter = exporterFromEnvironment(environment, shortLived);
  const resource = resourceFromAttributes({ 'service.name': DEFAULT_SERVICE_NAME }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  // A collector that is down: after a refused export, the breaker drops the next exports' spans unserialised for a
  // back-off (5 s, doubling to 60 s) and says so once (export-breaker.ts).
  const endpoint =
    environment.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
    environment.OTEL_EXPORTER_OTLP_ENDPOINT ||
    'http://localhost:4318';
  const processor = new BatchSpanProcessor(new ExportBreaker(exporter, { endpoint }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  provider.register();
  started = { provider, resource, workflowSpans: workflowSpanAdapter(processor) };
  return started;
}

/** The process's tracing, if started. */
export function activeTracing(): Tracing | undefined {
  return started;
}

/**
 * Sends what is left and stops tracing, waiting at most `timeoutMs` (default FANOUT_OTEL_FLUSH_MS, else 1000): spans
 * not out by then are dropped, and the exporter's errors (a collector down) are swallowed. Never throws.
 */
export async function stopTracing(timeoutMs?: number): Promise<void> {
  const tracing = started;
  if (!tracing) return;
  started = undefined;
  const bound = timeoutMs ?? flushMsFromEnvironment();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    tracing.provider.shutdown().catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, bound);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
}

/**
 * Sends every span ended so far (the process's and its workflows') without stopping tracing, waiting at most
 * `timeoutMs`. Never throws.
 */
export async function flushTracing(timeoutMs: number): Promise<void> {
  const tracing = started;
  if (!tracing) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all([tracing.provider.forceFlush(), tracing.workflowSpans.forceFlush()]).catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
}
