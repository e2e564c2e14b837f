import type { TracerProvider } from '@opentelemetry/api';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import type { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client';

/**
 * The client calls the SDK's OpenTelemetry client interceptor traces: its methods, named here so that the interceptor
 * has them without loading it (test/tracing-interceptor.test.ts holds the list to the SDK's class). The client composes
 * only the methods an interceptor has, so a missing name would go untraced, an extra one would only pass through.
 */
export const TRACED_CLIENT_CALLS = [
  'start',
  'startWithDetails',
  'signal',
  'startUpdate',
  'startUpdateWithStart',
  'signalWithStart',
  'query',
  'terminate',
  'cancel',
  'describe',
] as const satisfies readonly (keyof OpenTelemetryWorkflowClientInterceptor)[];

/**
 * Where @opentelemetry/api keeps what is registered in a process, shared by every copy of API major version 1 (the
 * version this package and the SDK's interceptor use): a tracer provider is there, under `trace`, from
 * `trace.setGlobalTracerProvider` (an SDK's `register()`) until `trace.disable()`. A copy of the API finds a provider only
 * through it, so without that entry none is registered, and the API (about 10-70 ms of a CLI command's start) need not
 * be loaded to say so.
 */
const OPENTELEMETRY_API_GLOBAL = Symbol.for('opentelemetry.js.api.1');

/** Whether a tracer provider is registered in this process: fanout's (any OTEL_* set) or the caller's own SDK. */
export function tracerRegistered(): boolean {
  const registered = (globalThis as { [OPENTELEMETRY_API_GLOBAL]?: { trace?: unknown } })[OPENTELEMETRY_API_GLOBAL];
  if (registered?.trace === undefined) return false;
  const { ProxyTracerProvider, trace } = require('@opentelemetry/api') as typeof import('@opentelemetry/api');
  // The API's no-op provider, which a ProxyTracerProvider delegates to until a real one is registered.
  noProvider ??= new ProxyTracerProvider().getDelegate();
  const provider = trace.getTracerProvider();
  const delegate = provider instanceof ProxyTracerProvider ? provider.getDelegate() : provider;
  return delegate !== noProvider;
}

let noProvider: TracerProvider | undefined;

/**
 * The SDK's OpenTelemetry client interceptor (a span per workflow start, signal, query, cancel ...; the caller's
 * active span as its parent; its context carried to the workflow in the `_tracer-data` header), asked at each call
 * whether a tracer provider is registered: without one the call goes straight on, and the run's history carries no
 * trace header. Asked per call, so a caller that sets up its SDK after connecting is traced from then on. The SDK's
 * interceptor, and OpenTelemetry's API with it, is loaded at the first call made while a provider is registered.
 */
export function tracingClientInterceptor(): WorkflowClientInterceptor {
  let traced: OpenTelemetryWorkflowClientInterceptor | undefined;
  const tracedInterceptor = (): OpenTelemetryWorkflowClientInterceptor => {
    if (traced === undefined) {
      const { OpenTelemetryWorkflowClientInterceptor: Interceptor } =
        require('@temporalio/interceptors-opentelemetry/lib/client') as typeof import('@temporalio/interceptors-opentelemetry/lib/client');
      traced = new Interceptor();
    }
    return traced;
  };
  const interceptor: Record<string, (input: unknown, next: (input: unknown) => unknown) => unknown> = {};
  for (const call of TRACED_CLIENT_CALLS) {
    interceptor[call] = (input, next) => {
      if (!tracerRegistered()) return next(input);
      const target = tracedInterceptor();
      return (target[call] as (input: unknown, next: (input: unknown) => unknown) => unknown).call(target, input, next);
    };
  }
  return interceptor as WorkflowClientInterceptor;
}
