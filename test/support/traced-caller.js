// A caller's own service, as a process of its own (OpenTelemetry's OTLP exporter loads node:http with a dynamic
// import, which jest's module sandbox refuses): with OTEL_* set, it starts tracing, opens a span of its own, starts a
// fan-out under it, waits for the result, exports its spans and prints `{ workflowId, result }` as JSON.
// Usage: node traced-caller.js <address> <task queue> <tasks JSON>
//        node traced-caller.js <address> <task queue> batch <source> <sink>   (a batch; prints { workflowId, result })
const { context, trace } = require('@opentelemetry/api');
const { FanoutClient, startTracingFromEnvironment, stopTracing } = require('../../dist/index.js');

async function main() {
  const [address, taskQueue, tasks, source, sink] = process.argv.slice(2);
  startTracingFromEnvironment();
  const span = trace.getTracer('test-caller').startSpan('caller request');
  const client = await FanoutClient.connect({ temporal: { address, namespace: 'default' }, taskQueue });
  try {
    const start = () =>
      tasks === 'batch' ? client.startBatch({ source, sink }) : client.startParallel(JSON.parse(tasks));
    const handle = await context.with(trace.setSpan(context.active(), span), start);
    const result = await handle.result();
    span.end();
    process.stdout.write(`${JSON.stringify({ workflowId: handle.workflowId ?? handle.batchId, result })}\n`);
  } finally {
    await client.close();
    await stopTracing();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
