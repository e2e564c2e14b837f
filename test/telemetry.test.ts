import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import path from 'node:path';
import { freePort } from '../src/local/free-port';
import { ExportBreaker, collectorUnreachable } from '../src/telemetry/export-breaker';
import { batchItemSampled, capturesMessageContent, providerOf } from '../src/telemetry/genai-spans';
import { tracingWanted } from '../src/telemetry/wanted';

describe('when tracing is on', () => {
  it('is off with no OTEL_* variable, or only empty ones', () => {
    expect(tracingWanted({})).toBe(false);
    expect(tracingWanted({ FANOUT_MODEL: 'x', OTEL_SERVICE_NAME: '' })).toBe(false);
  });

  it('is on with any OTEL_* variable, unless the SDK or the traces exporter is turned off', () => {
    expect(tracingWanted({ OTEL_SERVICE_NAME: 'svc' })).toBe(true);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBe(false);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
  });

  it("captures message content only with the conventions' opt-in set to true", () => {
    expect(capturesMessageContent({})).toBe(false);
    expect(capturesMessageContent({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'false' })).toBe(false);
    expect(capturesMessageContent({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'TRUE' })).toBe(true);
  });
});

describe("a batch's sampled items", () => {
  const ids = Array.from({ length: 100_000 }, (_, index) => `item-${index}`);

  it('traces about 1% of 100,000 items by default, the same ones every time', () => {
    const sampled = ids.filter((id) => batchItemSampled(id, {}));
    expect(sampled.length).toBeGreaterThan(800);
    expect(sampled.length).toBeLessThan(1200);
    expect(ids.filter((id) => batchItemSampled(id, {}))).toEqual(sampled);
  });

  it('follows FANOUT_OTEL_BATCH_ITEM_RATIO, 0 and 1 included', () => {
    const at = (ratio: string) =>
      ids.slice(0, 10_000).filter((id) => batchItemSampled(id, { FANOUT_OTEL_BATCH_ITEM_RATIO: ratio })).length;
    expect(at('0')).toBe(0);
    expect(at('1')).toBe(10_000);
    expect(at('0.25')).toBeGreaterThan(2300);
    expect(at('0.25')).toBeLessThan(2700);
    // Not a share: the default, never a failed call.
    expect(at('lots')).toBe(at(''));
    expect(at('2')).toBe(at(''));
  });
});

describe("a model call's provider", () => {
  it('is named as the GenAI conventions name it, with the server it went to', () => {
    expect(providerOf('https://api.openai.com/v1')).toEqual({
      provider: 'openai',
      address: 'api.openai.com',
      port: 443,
    });
    expect(providerOf('https://api.anthropic.com/v1').provider).toBe('anthropic');
    expect(providerOf('https://res.openai.azure.com/openai').provider).toBe('azure.ai.openai');
    expect(providerOf('http://127.0.0.1:8080/v1')).toEqual({ provider: 'openai', address: '127.0.0.1', port: 8080 });
    expect(providerOf(undefined)).toEqual({ provider: 'openai' });
  });
});

describe('a collector that is down', () => {
  type Exported = Parameters<ExportBreaker['export']>[0];
  type Result = Parameters<Parameters<ExportBreaker['export']>[1]>[0];
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
  const spans = (count: number) => Array.from({ length: count }, () => ({})) as unknown as Exported;

  /** An exporter whose exports end as `outcome` says, counting the exports it was given. */
  function fakeExporter(outcome: () => Result) {
    const given: number[] = [];
    return {
      given,
      export: (batch: Exported, done: (result: Result) => void) => {
        given.push(batch.length);
        done(outcome());
      },
      shutdown: () => Promise.resolve(),
    };
  }
  const exportOnce = (breaker: ExportBreaker, count: number) =>
    new Promise<Result>((resolve) => breaker.export(spans(count), resolve));

  it('drops spans unserialised for a back-off after a refused export, probes, doubles the pause, and says so once', async () => {
    let now = 0;
    let down = true;
    const inner = fakeExporter(() => (down ? { code: 1, error: refused } : { code: 0 }));
    const warnings: string[] = [];
    const breaker = new ExportBreaker(inner, {
      now: () => now,
      warn: (message) => warnings.push(message),
      endpoint: 'http://127.0.0.1:1',
    });
    expect((await exportOnce(breaker, 10)).code).toBe(1);
    expect(inner.given).toEqual([10]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('http://127.0.0.1:1 is unreachable (ECONNREFUSED)');
    // Within the first 5 s nothing reaches the exporter.
    now = 4_999;
    expect((await exportOnce(breaker, 20)).code).toBe(1);
    expect(inner.given).toEqual([10]);
    // Then one probe, refused: the next pause is 10 s.
    now = 5_000;
    await exportOnce(breaker, 30);
    expect(inner.given).toEqual([10, 30]);
    now = 14_999;
    await exportOnce(breaker, 5);
    expect(inner.given).toEqual([10, 30]);
    expect(warnings).toHaveLength(1);
    // The collector is back: the probe goes through, and exports flow again.
    down = false;
    now = 15_000;
    expect((await exportOnce(breaker, 7)).code).toBe(0);
    expect((await exportOnce(breaker, 8)).code).toBe(0);
    expect(inner.given).toEqual([10, 30, 7, 8]);
    expect(warnings).toHaveLength(2);
    expect(warnings[1]).toContain('answers again; 65 spans were dropped meanwhile');
  });

  it('does not stop exports for a request the collector refused as such (a 4xx), only for one it could not take', async () => {
    expect(collectorUnreachable(refused)).toBe(true);
    expect(collectorUnreachable(new Error('Request timed out'))).toBe(true);
    expect(collectorUnreachable(Object.assign(new Error('Service Unavailable'), { code: 503 }))).toBe(true);
    expect(collectorUnreachable(Object.assign(new Error('Too Many Requests'), { code: 429 }))).toBe(true);
    expect(collectorUnreachable(Object.assign(new Error('Bad Request'), { code: 400 }))).toBe(false);
    const inner = fakeExporter(() => ({ code: 1, error: Object.assign(new Error('Bad Request'), { code: 400 }) }));
    const breaker = new ExportBreaker(inner, { warn: () => undefined });
    await exportOnce(breaker, 1);
    await exportOnce(breaker, 2);
    expect(inner.given).toEqual([1, 2]);
  });

  it("a worker's tracing against a collector that answers 503: one export reaches it, then spans are dropped, said once", async () => {
    let requests = 0;
    const collector = createServer((request, response) => {
      requests += 1;
      request.resume();
      request.on('end', () => {
        response.writeHead(503);
        response.end();
      });
    });
    const port = await freePort();
    await new Promise<void>((resolve) => collector.listen(port, '127.0.0.1', resolve));
    try {
      // 40 exports of one span each, 50 ms apart; a timeout of 300 ms, shorter than the exporter's first back-off, so it
      // does not retry the 503 itself.
      const script = `
        const { startTracing, stopTracing } = require(${JSON.stringify(path.join(__dirname, '..', 'dist', 'telemetry', 'tracing.js'))});
        const tracing = startTracing();
        (async () => {
          for (let index = 0; index < 40; index += 1) {
            tracing.provider.getTracer('t').startSpan('s' + index).end();
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
          await stopTracing(200);
        })();`;
      const child = spawn(process.execPath, ['-e', script], {
        env: {
          ...process.env,
          OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
          OTEL_EXPORTER_OTLP_TIMEOUT: '300',
          OTEL_BSP_SCHEDULE_DELAY: '10',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      expect(await new Promise((resolve) => child.once('exit', resolve))).toBe(0);
      expect(requests).toBe(1);
      expect(stderr.match(/is unreachable/g)).toHaveLength(1);
      expect(stderr).toContain(`the OTLP collector at http://127.0.0.1:${port} is unreachable`);
    } finally {
      collector.close();
    }
  });
});
