/**
 * A research agent with two sub-agents and a tool that needs approval, in one command:
 *
 *   npx tsx examples/research.ts            # against the simulator (no key needed)
 *   npx tsx examples/research.ts --deny     # the person denies the publish call
 *   OPENAI_API_KEY=sk-... npx tsx examples/research.ts   # a real model, same agent
 *
 * It starts a local Temporal dev server, a worker with the tools of examples/research-tools.ts and (without a key) the
 * simulator, runs the task as a fan-out of one agent, prints its steps and tool calls as they happen, answers the
 * approval as a person would with `fanout approve`, and prints the answer. The Temporal UI shows every step.
 */
import path from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { formatAgentEvent, runningAgents } from '../src/cli/agent-view';
import type { AgentTask } from '../src/contract/agent-task';
import { startLocalStack } from '../src/local/local-stack';
import { approveUpdate } from '../src/workflows/agent/messages';

Runtime.install({ logger: new DefaultLogger('WARN') });
process.env.FANOUT_TOOLS = path.join(__dirname, 'research-tools.ts');
const real = Boolean(process.env.OPENAI_API_KEY);
const deny = process.argv.includes('--deny');

// For the simulator, directives script the model's moves (src/sim/tool-calls.ts); a real model reads the system prompt.
const subAgents = JSON.stringify({
  tasks: [
    {
      prompt: 'Find how Temporal keeps long agent loops alive. [[tool:web_search {"query":"durable history"}]]',
      tools: ['web_search'],
    },
    {
      prompt: 'Find what running agents on Temporal costs. [[tool:web_search {"query":"agents cost"}]]',
      tools: ['web_search'],
    },
  ],
});
const task: AgentTask = {
  id: 'research',
  name: 'Research: durable agents',
  system:
    'You are a research lead. Split the question into two sub-questions and hand them to spawn_agents (each sub-agent may use web_search), ' +
    'then publish a short report with publish_report, then answer with the report.',
  prompt: `How do durable agents on Temporal survive crashes, and what do they cost?${real ? '' : ` [[tool:spawn_agents ${subAgents}]] [[tool:publish_report {"title":"Durable agents","summary":"Steps are activities; history holds references."}]]`}`,
  tools: ['spawn_agents', 'web_search', 'publish_report'],
  maxSteps: 8,
};

async function main(): Promise<void> {
  const stack = await startLocalStack({ simulator: real ? false : { latency: { minMs: 150, maxMs: 400 } } });
  const say = (line: string) => process.stdout.write(`${line}\n`);
  try {
    say(
      `Temporal UI: ${stack.server.uiUrl}   model: ${real ? stack.providerUrl : 'the simulator (SIMULATED answers)'}`,
    );
    const handle = await stack.client.startParallel([task]);
    say(`run ${handle.workflowId}: ${task.name}`);
    const cursors = new Map<string, number>();
    const answered = new Set<string>();
    let closed = false;
    const result = handle.result().finally(() => (closed = true));
    while (!closed) {
      const progress = await handle.progress().catch(() => undefined);
      const agents = progress
        ? await runningAgents(
            stack.client.client.workflow,
            { workflowId: handle.workflowId, type: 'fanOut', progress },
            { cursors },
          )
        : [];
      for (const { workflowId, progress: agent } of agents) {
        for (const event of agent.events) {
          cursors.set(workflowId, event.seq);
          say(formatAgentEvent(agent.taskId, event));
        }
        for (const call of agent.waiting.filter((waiting) => !answered.has(waiting.callId))) {
          answered.add(call.callId);
          say(
            `  -> waits for a person: fanout approve ${workflowId} ${call.callId}${deny ? ' --deny "not yet"' : ''}   (answering now, as that person)`,
          );
          await stack.client.client.workflow.getHandle(workflowId).executeUpdate(approveUpdate, {
            args: [{ callId: call.callId, approve: !deny, ...(deny ? { reason: 'not yet' } : {}) }],
          });
        }
      }
      await Promise.race([result.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 300))]);
    }
    const [agent] = (await result).results;
    say(
      `\n${agent.status}: ${agent.steps ?? 0} model steps, ${agent.usage?.totalTokens ?? 0} tokens${agent.costUsd === undefined ? '' : `, $${agent.costUsd}`}`,
    );
    say(agent.output ?? agent.error?.message ?? '');
  } finally {
    await stack.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
