import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client';
import { TRACED_CLIENT_CALLS, tracerRegistered, tracingClientInterceptor } from '../src/client/tracing-interceptor';

type Call = (input: unknown, next: (input: unknown) => Promise<unknown>) => Promise<unknown>;

const describeInput = { workflowExecution: { workflowId: 'run-1' }, headers: {} };

describe("the client's tracing interceptor", () => {
  afterEach(() => trace.disable());

  it("has every method of the SDK's OpenTelemetry client interceptor, and no other", () => {
    const methods = Object.getOwnPropertyNames(OpenTelemetryWorkflowClientInterceptor.prototype).filter(
      (name) => name !== 'constructor',
    );
    expect([...TRACED_CLIENT_CALLS].sort()).toEqual(methods.sort());
    expect(Object.keys(tracingClientInterceptor()).sort()).toEqual(methods.sort());
  });

  it('sees a tracer provider from its registration until tracing is disabled', () => {
    expect(tracerRegistered()).toBe(false);
    trace.setGlobalTracerProvider(new BasicTracerProvider());
    expect(tracerRegistered()).toBe(true);
    trace.disable();
    expect(tracerRegistered()).toBe(false);
  });

  it('passes a call straight on without a tracer provider, and makes its span once one is registered', async () => {
    const interceptor = tracingClientInterceptor();
    const call = interceptor.describe as unknown as Call;
    const exporter = new InMemorySpanExporter();
    const next = jest.fn((input: unknown) => Promise.resolve(input));

    await expect(call(describeInput, next)).resolves.toBe(describeInput);
    expect(next).toHaveBeenCalledTimes(1);

    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    await expect(call(describeInput, next)).resolves.toBe(describeInput);
    expect(next).toHaveBeenCalledTimes(2);
    expect(exporter.getFinishedSpans().map((span) => span.name)).toEqual(['DescribeWorkflow']);
  });

  it("loads neither OpenTelemetry's API nor the SDK's interceptor for a call made without a tracer provider", () => {
    const module = path.join(__dirname, '..', 'dist', 'client', 'tracing-interceptor.js');
    const script = `
      const { tracingClientInterceptor } = require(${JSON.stringify(module)});
      tracingClientInterceptor().describe({}, async () => 'answered').then((answer) => {
        const loaded = Object.keys(require.cache).filter((file) => file.includes('opentelemetry'));
        process.stdout.write(JSON.stringify({ answer, loaded }));
      });`;
    expect(JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }))).toEqual({
      answer: 'answered',
      loaded: [],
    });
  });
});
