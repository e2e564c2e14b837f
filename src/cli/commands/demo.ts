import { Command } from 'commander';
import type { AgentTask } from '../../contract/agent-task';
import { startLocalStack } from '../../local/local-stack';
import { exitCodeFor } from './run';
import { formatRunReport } from '../report';

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
        const handle = await stack.client.startParallel(
          tasks,
          {},
          { summary: `Demo fan-out of ${tasks.length} agents` },
        );
        const uiLink = `${stack.server.uiUrl}/namespaces/${stack.server.namespace}/workflows/${handle.workflowId}`;
        log(`started ${handle.workflowId}; waiting for ${tasks.length} agents in parallel ...`);
        const result = await handle.result();
        process.stdout.write(`\n${formatRunReport(result)}\n\nTemporal UI for this run: ${uiLink}\n`);
        process.exitCode = exitCodeFor(result);
        if (flags.keepServer) {
          log('\nthe dev server and worker stay up; press Ctrl-C to stop them');
          await new Promise<void>((resolve) => {
            process.once('SIGINT', resolve);
            process.once('SIGTERM', resolve);
          });
        }
      } finally {
        await stack.stop();
      }
    });
}
