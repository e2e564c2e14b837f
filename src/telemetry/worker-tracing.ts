import { existsSync } from 'node:fs';
import type { ActivityInterceptorsFactory, InjectedSinks } from '@temporalio/worker';
import {
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  makeWorkflowExporter,
  type OpenTelemetrySinks,
} from '@temporalio/interceptors-opentelemetry';
import type { Tracing } from './tracing';

/** What a worker adds when tracing is on (src/worker.ts). */
export interface WorkerTracing {
  /** The SDK's activity interceptors: a span per activity attempt, under the span of the workflow that scheduled it. */
  activity: ActivityInterceptorsFactory;
  /** The sink through which workflow code hands its spans out of the sandbox (never called while a run replays). */
  sinks: InjectedSinks<OpenTelemetrySinks>;
  /** The workflow interceptor module, for a worker that bundles its workflows from source. */
  workflowModule: string;
  /** The traced twin of a prebuilt bundle, if there is one. */
  tracedBundleOf(bundlePath: string): string | undefined;
}

export function workerTracing(tracing: Tracing): WorkerTracing {
  // The SDK's sink is typed for OpenTelemetry 1.x, which it bundles; `workflowSpans` takes its spans as they come
  // (tracing.ts adapts them to the 2.x exporter).
  const exporter = makeWorkflowExporter(
    tracing.workflowSpans as unknown as Parameters<typeof makeWorkflowExporter>[0],
    tracing.resource as unknown as Parameters<typeof makeWorkflowExporter>[1],
  );
  return {
    activity: (context) => ({
      inbound: new OpenTelemetryActivityInboundInterceptor(context),
      outbound: new OpenTelemetryActivityOutboundInterceptor(context),
    }),
    sinks: { exporter },
    workflowModule: require.resolve('./workflow-interceptors'),
    tracedBundleOf,
  };
}

/**
 * The traced twin of a prebuilt workflow bundle: `npm run build` writes `workflow-bundle-traced.js` beside
 * `workflow-bundle.js`, the same workflows with the OpenTelemetry workflow interceptors. Undefined when there is none.
 */
export function tracedBundleOf(bundlePath: string): string | undefined {
  const traced = bundlePath.replace(/\.js$/, '-traced.js');
  return traced !== bundlePath && existsSync(traced) ? traced : undefined;
}
