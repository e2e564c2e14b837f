import { z } from 'zod';
import type { AgentTask } from '../src/contract/agent-task';
import type { PayloadRef } from '../src/contract/payload-ref';
import { defineTool, ToolInputError } from '../src/tools/define-tool';
import { ToolRegistry } from '../src/tools/registry';
import { spawnAgentsTool } from '../src/tools/spawn-agents';
import type { ToolPrepareContext } from '../src/tools/workflow-tool';

const search = defineTool({
  name: 'search',
  description: 'Searches',
  input: z.object({ q: z.string() }),
  run: ({ q }) => `found ${q}`,
});

const lead: AgentTask = { id: 'lead', prompt: 'Delegate', tools: ['spawn_agents', 'search'] };

/** A prepare context whose store records what it was given. */
function preparing(stored: { name: string; content: string }[] = []): ToolPrepareContext {
  return {
    task: lead,
    step: 2,
    index: 0,
    storeInput: (name, content) => {
      stored.push({ name, content });
      return Promise.resolve({ uri: `memory://${name}`, bytes: content.length, sha256: '0'.repeat(64) });
    },
  };
}

describe('the tool registry', () => {
  it('finds the built-in spawn_agents as a tool the workflow runs, and registered tools as activity tools', async () => {
    const { tools, unknown } = await new ToolRegistry([search]).resolve(['search', 'spawn_agents', 'nowhere']);
    expect(tools.map((tool) => [tool.name, tool.runner])).toEqual([
      ['search', 'activity'],
      ['spawn_agents', 'workflow'],
    ]);
    expect(unknown).toEqual(['nowhere']);
  });

  it('refuses a registered tool that takes the name of a built-in one', () => {
    const impostor = defineTool({ ...search, name: 'spawn_agents', input: z.object({}), run: () => 'no' });
    expect(() => new ToolRegistry([impostor])).toThrow('"spawn_agents" is a built-in tool');
  });
});

describe('spawn_agents, prepared in the step', () => {
  it("turns the model's arguments into the sub-agents' tasks, ids derived from the step and the call", async () => {
    const tasks = await spawnAgentsTool.prepare(
      {
        tasks: [
          { prompt: 'one', tools: ['search'] },
          { prompt: 'two', maxSteps: 3 },
        ],
      },
      preparing(),
    );
    expect(tasks).toEqual([
      { id: 'lead.2-1-1', name: 'lead / sub-agent 1', prompt: 'one', tools: ['search'] },
      { id: 'lead.2-1-2', name: 'lead / sub-agent 2', prompt: 'two', maxSteps: 3 },
    ]);
  });

  it('refuses, for the model to read, a sub-agent that asks for a tool its parent does not have', async () => {
    const asked = spawnAgentsTool.prepare({ tasks: [{ prompt: 'one', tools: ['publish'] }] }, preparing());
    await expect(asked).rejects.toThrow(ToolInputError);
    await expect(asked).rejects.toThrow('task 1 asks for tools this agent does not have: publish');
  });

  it('moves a large prompt to the store, leaving a placeholder and its reference', async () => {
    const stored: { name: string; content: string }[] = [];
    const prompt = 'x'.repeat(5000);
    const [task] = await spawnAgentsTool.prepare({ tasks: [{ prompt }] }, preparing(stored));
    expect(stored).toEqual([{ name: 'lead.2-1-1', content: JSON.stringify({ prompt }) }]);
    expect(task.prompt).toBe(`${'x'.repeat(200)}… (stored)`);
    expect(task.contentRef?.uri).toBe('memory://lead.2-1-1');
  });
});

describe('spawn_agents, reported in the tool call', () => {
  it("reports each sub-agent's answer in task order, reading stored ones, ok only when every one answered", async () => {
    const ref: PayloadRef = { uri: 'memory://answer', bytes: 6, sha256: '0'.repeat(64) };
    const report = await spawnAgentsTool.report(
      [
        { id: 'a', status: 'ok', outputRef: ref },
        { id: 'b', status: 'failed', error: 'boom' },
      ],
      { read: (read) => Promise.resolve(read.uri === ref.uri ? 'stored' : '') },
    );
    expect(JSON.parse(report.text)).toEqual([
      { id: 'a', status: 'ok', output: 'stored' },
      { id: 'b', status: 'failed', error: 'boom' },
    ]);
    expect(report.ok).toBe(false);
  });
});
