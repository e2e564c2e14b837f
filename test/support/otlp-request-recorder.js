// Loaded with `node --require` (NODE_OPTIONS) into a process under test: records every OTLP export it attempts (an
// HTTP request to a /v1/traces, /v1/metrics or /v1/logs path, wherever it goes) and how many modules of
// OpenTelemetry's SDK and exporters it loaded, as one JSON line per process appended to FANOUT_TEST_OTLP_RECORD at exit.
const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');

const sent = [];
for (const transport of [http, https]) {
  const request = transport.request;
  transport.request = function recordedRequest(...args) {
    const [target, options] = args;
    const pathname =
      typeof target === 'string' || target instanceof URL ? new URL(target).pathname : (target ?? options)?.path;
    if (/\/v1\/(traces|metrics|logs)\b/.test(pathname ?? '')) sent.push(pathname);
    return request.apply(this, args);
  };
}

process.on('exit', () => {
  const sdkModules = Object.keys(require.cache).filter((file) =>
    /@opentelemetry[\\/](sdk-|exporter-|otlp-)/.test(file),
  ).length;
  fs.appendFileSync(process.env.FANOUT_TEST_OTLP_RECORD, `${JSON.stringify({ pid: process.pid, sent, sdkModules })}\n`);
});
