import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { diesWithParent, exitOf } from './child-processes';
import { ensureTool } from './ensure-tool';
import { freePort } from './free-port';
import { FatalWaitError, waitFor } from './wait-for';

/** A span as Jaeger's HTTP API returns it (`/api/traces`). */
export interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references: { refType: string; traceID: string; spanID: string }[];
  startTime: number;
  duration: number;
  tags: { key: string; type: string; value: unknown }[];
  processID: string;
}

export interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string }>;
}

/**
 * A local Jaeger (all-in-one, spans in memory) taking OTLP over HTTP and answering its query API: the trace store of
 * `fanout demo --trace` and of the tracing tests.
 */
export interface Jaeger {
  /** The OTLP/HTTP endpoint, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly otlpEndpoint: string;
  /** The query API and UI. */
  readonly queryUrl: string;
  /** The traces Jaeger holds of a service (at most `limit`). */
  traces(service: string, limit?: number): Promise<JaegerTrace[]>;
  /** One trace by its id (hex), undefined while Jaeger holds none of it. */
  trace(traceId: string): Promise<JaegerTrace | undefined>;
  stop(): Promise<void>;
}

/** Jaeger v2's configuration: OTLP/HTTP in, memory storage, the query API; every port on 127.0.0.1. */
function configOf(ports: { otlp: number; http: number; grpc: number }): string {
  return `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:${ports.http}
    grpc:
      endpoint: 127.0.0.1:${ports.grpc}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${ports.otlp}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`;
}

/**
 * Starts Jaeger (scripts/ensure-jaeger.sh finds or builds it once per machine) on free ports and returns once its
 * query API answers.
 */
export async function startJaeger(): Promise<Jaeger> {
  const binary = ensureTool(
    'ensure-jaeger.sh',
    'no Jaeger binary is available (see the messages above); set JAEGER_BIN',
  );
  const directory = mkdtempSync(path.join(tmpdir(), 'fanout-jaeger-'));
  const ports = { otlp: await freePort(), http: await freePort(), grpc: await freePort() };
  const config = path.join(directory, 'jaeger.yaml');
  writeFileSync(config, configOf(ports));
  const [command, args] = diesWithParent(binary, ['--config', `file:${config}`], 'TERM');
  let output = '';
  const child: ChildProcess = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const queryUrl = `http://127.0.0.1:${ports.http}`;
  const stop = async () => {
    child.kill('SIGTERM');
    await exitOf(child);
    rmSync(directory, { recursive: true, force: true });
  };
  try {
    await waitFor('Jaeger to answer', async () => {
      if (child.exitCode !== null)
        throw new FatalWaitError(new Error(`jaeger exited with ${child.exitCode}: ${output}`));
      const answered = await fetch(`${queryUrl}/api/services`).catch(() => undefined);
      return answered?.ok ? true : undefined;
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    otlpEndpoint: `http://127.0.0.1:${ports.otlp}`,
    queryUrl,
    stop,
    trace: async (traceId) => {
      const response = await fetch(`${queryUrl}/api/traces/${encodeURIComponent(traceId)}`);
      if (response.status === 404) return undefined;
      if (!response.ok) throw new Error(`Jaeger answered ${response.status}: ${await response.text()}`);
      return ((await response.json()) as { data: JaegerTrace[] | null }).data?.[0];
    },
    traces: async (service, limit = 100) => {
      const response = await fetch(`${queryUrl}/api/traces?service=${encodeURIComponent(service)}&limit=${limit}`);
      if (!response.ok) throw new Error(`Jaeger answered ${response.status}: ${await response.text()}`);
      return ((await response.json()) as { data: JaegerTrace[] | null }).data ?? [];
    },
  };
}

/** A span's tag value. */
export function tagOf(span: JaegerSpan, key: string): unknown {
  return span.tags.find((tag) => tag.key === key)?.value;
}

/** The span's parent in its trace (its CHILD_OF reference). */
export function parentOf(trace: JaegerTrace, span: JaegerSpan): JaegerSpan | undefined {
  const reference = span.references.find((candidate) => candidate.refType === 'CHILD_OF');
  return reference && trace.spans.find((candidate) => candidate.spanID === reference.spanID);
}

/** The names of a span's ancestors, nearest first. */
export function ancestorsOf(trace: JaegerTrace, span: JaegerSpan): string[] {
  const names: string[] = [];
  for (let parent = parentOf(trace, span); parent; parent = parentOf(trace, parent)) names.push(parent.operationName);
  return names;
}
