import { ProxyTracerProvider, trace } from '@opentelemetry/api';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client';

/** The API's no-op provider, which a ProxyTracerProvider delegates to until a real one is registered. */
const NO_PROVIDER = new ProxyTracerProvider().getDelegate();

/** Whether a tracer provider is registered in this process: fanout's (any OTEL_* set) or the caller's own SDK. */
function tracerRegistered(): boolean {
  const provider = trace.getTracerProvider();
  const delegate = provider instanceof ProxyTracerProvider ? provider.getDelegate() : provider;
  return delegate !== NO_PROVIDER;
}

/**
 * The SDK's OpenTelemetry client interceptor (a span per workflow start, signal, query, cancel ...; the caller's
 * active span as its parent; its context carried to the workflow in the `_tracer-data` header), asked at each call
 * whether a tracer provider is registered: without one the call goes straight on, and the run's history carries no
 * trace header. Asked per call, so a caller that sets up its SDK after connecting is traced from then on.
 */
export function tracingClientInterceptor(): WorkflowClientInterceptor {
  const traced = new OpenTelemetryWorkflowClientInterceptor();
  return new Proxy(traced, {
    get(target, property, receiver) {
      const member: unknown = Reflect.get(target, property, receiver);
      if (typeof member !== 'function') return member;
      return (input: unknown, next: (input: unknown) => unknown) =>
        tracerRegistered()
          ? (member as typeof next & ((...args: unknown[]) => unknown)).call(target, input, next)
          : next(input);
    },
  }) as WorkflowClientInterceptor;
}
