import { z } from 'zod';
import { MAX_SPAWNED_AGENTS, SPAWN_AGENTS_TOOL } from '../contract/agent-loop';
import { agentTaskSchema, type AgentTask } from '../contract/agent-task';
import { ToolInputError } from './define-tool';
import type { WorkflowTool } from './workflow-tool';

/** What the model is told `spawn_agents` takes. */
const SPAWN_PARAMETERS = {
  type: 'object',
  properties: {
    tasks: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_SPAWNED_AGENTS,
      description: 'One entry per sub-agent; they run in parallel and their answers come back in this order.',
      items: {
        type: 'object',
        properties: {
          prompt: { type: 'string', description: "The sub-agent's task." },
          system: { type: 'string' },
          tools: {
            type: 'array',
            items: { type: 'string' },
            description: 'Tools the sub-agent may use (a subset of yours).',
          },
          maxSteps: { type: 'integer', minimum: 1 },
        },
        required: ['prompt'],
      },
    },
  },
  required: ['tasks'],
};

const spawnArgumentsSchema = z.object({
  tasks: z
    .array(
      z.object({
        prompt: z.string().min(1),
        system: z.string().optional(),
        tools: z.array(z.string()).optional(),
        maxSteps: z.number().int().min(1).max(10_000).optional(),
      }),
    )
    .min(1)
    .max(MAX_SPAWNED_AGENTS),
});

/** Prompts of sub-agents over this size go to the store, as large prompts of any task do. */
const INLINE_PROMPT_BYTES = 4096;

/**
 * The built-in `spawn_agents`: runs sub-agents in parallel, as child workflows of the agent (depth permitting), and
 * returns their answers in task order. The step validates the sub-agents' tasks (their tools a subset of the caller's),
 * the workflow runs them, and each one's answer (or why it has none) is the result.
 */
export const spawnAgentsTool: WorkflowTool<typeof SPAWN_AGENTS_TOOL> = {
  runner: 'workflow',
  name: SPAWN_AGENTS_TOOL,
  description: 'Runs sub-agents in parallel and returns their answers in task order.',
  parameters: SPAWN_PARAMETERS,

  async prepare(input, { task: parent, step, index: callIndex, storeInput }) {
    const parsed = spawnArgumentsSchema.safeParse(input);
    if (!parsed.success)
      throw new ToolInputError(`invalid arguments: ${z.prettifyError(parsed.error).replace(/\n/g, '; ')}`);
    const allowed = new Set(parent.tools ?? []);
    const tasks: AgentTask[] = [];
    for (const [index, spec] of parsed.data.tasks.entries()) {
      const outside = (spec.tools ?? []).filter((tool) => !allowed.has(tool));
      if (outside.length > 0)
        throw new ToolInputError(`task ${index + 1} asks for tools this agent does not have: ${outside.join(', ')}`);
      const id = `${parent.id}.${step}-${callIndex + 1}-${index + 1}`.slice(-128);
      let task: AgentTask = {
        id,
        name: `${parent.name ?? parent.id} / sub-agent ${index + 1}`,
        prompt: spec.prompt,
        ...(spec.system === undefined ? {} : { system: spec.system }),
        ...(parent.model === undefined ? {} : { model: parent.model }),
        ...(spec.tools === undefined ? {} : { tools: spec.tools }),
        ...(spec.maxSteps === undefined ? {} : { maxSteps: spec.maxSteps }),
      };
      if (Buffer.byteLength(spec.prompt) + Buffer.byteLength(spec.system ?? '') > INLINE_PROMPT_BYTES) {
        const contentRef = await storeInput(
          id,
          JSON.stringify({ prompt: spec.prompt, system: spec.system }),
          `storing the prompt of sub-agent ${id}`,
        );
        const { system: _system, ...rest } = task;
        task = { ...rest, prompt: `${spec.prompt.slice(0, 200)}… (stored)`, contentRef };
      }
      const checked = agentTaskSchema.safeParse(task);
      if (!checked.success)
        throw new ToolInputError(`task ${index + 1}: ${z.prettifyError(checked.error).replace(/\n/g, '; ')}`);
      tasks.push(checked.data);
    }
    return tasks;
  },

  async report(agents, { read }) {
    const answers = await Promise.all(
      agents.map(async (agent) => {
        const output =
          agent.output === undefined && agent.outputRef
            ? await read(agent.outputRef, `reading the answer of sub-agent ${agent.id}`)
            : agent.output;
        return {
          id: agent.id,
          status: agent.status,
          ...(output === undefined ? {} : { output }),
          ...(agent.error === undefined ? {} : { error: agent.error }),
        };
      }),
    );
    return { text: JSON.stringify(answers), ok: agents.every((agent) => agent.status === 'ok') };
  },
};
