import type { AgentTask, ModelProvider, PromptCache } from './agent-task';

/*
 * What workflows read of a task, apart from its schema. agent-task.ts builds the zod schemas when it is loaded, and
 * Temporal loads a workflow's modules afresh for every run it starts (zod and the schemas cost some 12 ms of each
 * agent's first workflow task): the `agent` workflow imports this file, and the schemas only when it must validate.
 */

/** The provider a call goes to: the task's (or run's) `provider` if set, else by model name (`claude-*` Anthropic). */
export function providerOfCall(model: string, provider?: ModelProvider): ModelProvider {
  return provider ?? (model.startsWith('claude-') ? 'anthropic' : 'openai');
}

/** The task with its run's `provider` and `promptCache` where it sets none (the activity then reads the task alone). */
export function withCallDefaults<T extends { provider?: ModelProvider; promptCache?: PromptCache }>(
  task: T,
  defaults: { provider?: ModelProvider; promptCache?: PromptCache },
): T {
  const provider = task.provider ?? defaults.provider;
  const promptCache = task.promptCache ?? defaults.promptCache;
  if (provider === task.provider && promptCache === task.promptCache) return task;
  return {
    ...task,
    ...(provider === undefined ? {} : { provider }),
    ...(promptCache === undefined ? {} : { promptCache }),
  };
}

/** Model steps an agent with tools may take when its task sets no `maxSteps`. */
export const DEFAULT_MAX_STEPS = 20;

/** True when a task runs as a multi-step agent (the `agent` workflow) rather than as one call. */
export function runsAsAgent(task: Pick<AgentTask, 'tools' | 'output'>): boolean {
  return (task.tools !== undefined && task.tools.length > 0) || task.output !== undefined;
}
