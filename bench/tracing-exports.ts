/**
 * What exporting a batch's spans costs the worker's main thread, by where they go: a collector that takes them, a port
 * nothing listens on, and that port behind the circuit breaker (src/telemetry/export-breaker.ts). The spans of a
 * 4,000-item batch (bench/span-census.ts: 861, of them 820 lane spans) are made and exported through the batch span
 * processor as a worker does, BENCH_ROUNDS times per way (default 5, the ways taking turns); CPU of this process and
 * wall until every export has ended.
 *
 *   npx tsx bench/tracing-exports.ts
 */
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { freePort } from '../src/local/free-port';
import { ExportBreaker } from '../src/telemetry/export-breaker';
import { startDiscardingCollector } from './tracing-support';

const SPANS = 861;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

async function exportBatch(exporter: SpanExporter): Promise<{ cpuMs: number; wallMs: number }> {
  const processor = new BatchSpanProcessor(exporter, { scheduledDelayMillis: 5000 });
  const provider = new BasicTracerProvider({ spanProcessors: [processor] });
  const tracer = provider.getTracer('bench');
  const cpu = process.cpuUsage();
  const startedAt = performance.now();
  for (let index = 0; index < SPANS; index += 1) {
    const span = tracer.startSpan('RunActivity:runBatchLane', {
      attributes: { temporalActivityId: String(index), temporalWorkflowId: 'batch/window-0', run_id: 'r' },
    });
    span.end();
  }
  await processor.forceFlush().catch(() => undefined);
  const used = process.cpuUsage(cpu);
  const wallMs = performance.now() - startedAt;
  await provider.shutdown().catch(() => undefined);
  return { cpuMs: (used.user + used.system) / 1000, wallMs };
}

async function main(): Promise<void> {
  const collector = await startDiscardingCollector();
  const nowhere = `http://127.0.0.1:${await freePort()}/v1/traces`;
  const ways: Record<string, () => SpanExporter> = {
    'collector up': () => new OTLPTraceExporter({ url: `${collector.endpoint}/v1/traces`, timeoutMillis: 1000 }),
    'collector down': () => new OTLPTraceExporter({ url: nowhere, timeoutMillis: 1000 }),
    'collector down, breaker': () =>
      new ExportBreaker(new OTLPTraceExporter({ url: nowhere, timeoutMillis: 1000 }), { warn: () => undefined }),
  };
  const names = Object.keys(ways);
  const results = new Map(names.map((name) => [name, [] as { cpuMs: number; wallMs: number }[]]));
  // The breaker's state lasts across a worker's batches: one breaker for all its rounds, as in a worker.
  const breaker = ways['collector down, breaker']();
  await exportBatch(ways['collector up']()); // warm-up
  for (let round = 0; round < ROUNDS; round += 1)
    for (let place = 0; place < names.length; place += 1) {
      const name = names[(round + place) % names.length];
      results.get(name)?.push(await exportBatch(name === 'collector down, breaker' ? breaker : ways[name]()));
    }
  await collector.close();
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  console.error(`${SPANS} spans per batch, ${ROUNDS} rounds: CPU and wall (ms) per batch, medians`);
  for (const name of names) {
    const runs = results.get(name) ?? [];
    console.error(
      `| ${name} | ${median(runs.map((run) => run.cpuMs)).toFixed(0)} | ${median(runs.map((run) => run.wallMs)).toFixed(0)} |`,
    );
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
