import { Command } from 'commander';
import type { AgentTask } from '../../contract/agent-task';
import { startLocalStack } from '../../local/local-stack';
import { exitCodeFor } from './run';
import { formatRunReport } from '../report';
import { startJaeger, type Jaeger } from '../../local/jaeger';
import { waitFor } from '../../local/wait-for';
import { fanoutTracer } from '../../telemetry/genai-spans';
import { flushTracing, startTracingFromEnvironment, stopTracing } from '../../telemetry/lifecycle';
import { formatTraceTree } from '../trace-tree';

/** The demo's agents: different roles, and (on the simulator) different latencies. */
const DEMO_AGENTS: (AgentTask & { simulatedLatencyMs: number })[] = [
  {
    id: 'researcher',
    name: 'Researcher',
    system: 'You are a meticulous researcher.',
    prompt: 'List the top 5 async Python web frameworks.',
    simulatedLatencyMs: 2400,
  },
  {
    id: 'analyst',
    name: 'Analyst',
    system: 'You are a data analyst.',
    prompt: 'Summarise trends in Q3 sales data in three bullets.',
    simulatedLatencyMs: 1600,
  },
  {
    id: 'fact-checker',
    name: 'Fact checker',
    system: 'You verify claims and cite sources.',
    prompt: 'Is Python older than Java? Answer briefly.',
    simulatedLatencyMs: 900,
  },
  {
    id: 'coder',
    name: 'Coder',
    system: 'You write concise TypeScript.',
    prompt: 'Write a function that retries a promise three times.',
    simulatedLatencyMs: 1200,
  },
  {
    id: 'editor',
    name: 'Editor',
    system: 'You edit prose for clarity.',
    prompt: 'Tighten: "In order to be able to run faster, we run in parallel."',
    simulatedLatencyMs: 500,
  },
];

interface DemoFlags {
  keepServer?: boolean;
  trace?: boolean;
}

export function demoCommand(): Command {
  return new Command('demo')
    .description(
      'start a local dev server, a worker and the simulator, run a 5-agent fan-out, print results and metrics',
    )
    .option(
      '--keep-server',
      'keep the dev server and worker up after the run, to browse the Temporal UI (Ctrl-C stops)',
    )
    .option(
      '--trace',
      'trace the run with OpenTelemetry: to a local Jaeger it starts (built once per machine, like the dev server), whose span tree it prints; to your collector when OTEL_EXPORTER_OTLP_ENDPOINT is set',
    )
    .addHelpText(
      'after',
      '\nWith OPENAI_API_KEY set, the agents call the real provider (OPENAI_BASE_URL, model FANOUT_MODEL) instead of the simulator.',
    )
    .action(async (flags: DemoFlags) => {
      const real = Boolean(process.env.OPENAI_API_KEY);
      const log = (line: string) => process.stderr.write(`${line}\n`);
      log(
        'starting a local Temporal dev server, a worker and ' + (real ? 'the real provider' : 'the simulator') + ' ...',
      );
      const tracing = flags.trace ? await startDemoTracing(log) : undefined;
      const stack = await startLocalStack({
        simulator: real
          ? false
          : { latencyByTask: Object.fromEntries(DEMO_AGENTS.map((agent) => [agent.id, agent.simulatedLatencyMs])) },
      });
      try {
        log(`Temporal ${stack.server.address}, Web UI ${stack.server.uiUrl}`);
        log(
          `agents call ${stack.providerUrl}${real ? '' : ' (SIMULATED completions: set OPENAI_API_KEY for a real model)'}`,
        );
        const tasks = DEMO_AGENTS.map(({ simulatedLatencyMs: _latency, ...task }) => task);
        // Traced, the run's trace begins with a span of the demo's own, whose trace id says where to look.
        const start = () =>
          stack.client.startParallel(tasks, {}, { summary: `Demo fan-out of ${tasks.length} agents` });
        const { handle, traceId } = tracing ? await tracing.traced(start) : { handle: await start() };
        const uiLink = `${stack.server.uiUrl}/namespaces/${stack.server.namespace}/workflows/${handle.workflowId}`;
        log(`started ${handle.workflowId}; waiting for ${tasks.length} agents in parallel ...`);
        const result = await handle.result();
        process.stdout.write(`\n${formatRunReport(result)}\n\nTemporal UI for this run: ${uiLink}\n`);
        process.exitCode = exitCodeFor(result);
        if (tracing && traceId) await tracing.show(traceId, tasks.length);
        if (flags.keepServer) {
          log('\nthe dev server and worker stay up; press Ctrl-C to stop them');
          await new Promise<void>((resolve) => {
            process.once('SIGINT', resolve);
            process.once('SIGTERM', resolve);
          });
        }
      } finally {
        await stack.stop();
        await tracing?.stop();
      }
    });
}

/** The demo's tracing: where its spans go, and how it shows them. */
interface DemoTracing {
  /** Runs `start` inside the demo's own span and returns its result with the trace id. */
  traced<T>(start: () => Promise<T>): Promise<{ handle: T; traceId: string }>;
  /** Flushes the spans (the worker's too) and prints where the trace is, and its tree when local. */
  show(traceId: string, agents: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Turns tracing on for `fanout demo --trace`, before the worker and client exist: to the user's collector when an
 * OTEL_EXPORTER_OTLP_* endpoint is set, else to a Jaeger started here on free ports (scripts/ensure-jaeger.sh finds
 * or builds it once per machine), whose query API gives the trace back to print.
 */
async function startDemoTracing(log: (line: string) => void): Promise<DemoTracing> {
  const own = process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  let jaeger: Jaeger | undefined;
  if (own === undefined) {
    log('starting a local Jaeger for the trace (built once per machine: minutes the first time) ...');
    jaeger = await startJaeger();
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = jaeger.otlpEndpoint;
    process.env.OTEL_BSP_SCHEDULE_DELAY ??= '200';
  }
  process.env.OTEL_SERVICE_NAME ??= 'fanout-demo';
  startTracingFromEnvironment({ shortLived: true });
  return {
    traced: (start) =>
      fanoutTracer().startActiveSpan('fanout demo', async (span) => {
        try {
          return { handle: await start(), traceId: span.spanContext().traceId };
        } finally {
          span.end();
        }
      }),
    show: async (traceId, agents) => {
      // The run has ended, so its workflows' spans are out of the sandbox: flushing both processors sends them all.
      await flushTracing(5000);
      if (!jaeger) {
        process.stdout.write(`\ntrace ${traceId} sent to ${own}\n`);
        return;
      }
      const store = jaeger;
      const trace = await waitFor(
        'the whole trace in Jaeger',
        async () => {
          const found = await store.trace(traceId);
          const chats = found?.spans.filter((span) => span.operationName.startsWith('chat ')).length ?? 0;
          return found && chats >= agents ? found : undefined;
        },
        { timeoutMs: 15_000 },
      ).catch(() => undefined);
      process.stdout.write(
        trace
          ? `\nTrace ${traceId} (Jaeger API ${store.queryUrl}/api/traces/${traceId}):\n${formatTraceTree(trace)}\n`
          : `\ntrace ${traceId} did not reach Jaeger whole within 15 s\n`,
      );
    },
    stop: async () => {
      await stopTracing();
      await jaeger?.stop();
    },
  };
}
