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
