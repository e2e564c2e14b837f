import type { AgentCallResult } from '../contract/agent-call';
import type { AgentTask } from '../contract/agent-task';
import { usageFromChat } from './token-usage';
import { sendChat, type ChatCallOptions, type ChatDependencies } from './send-chat';

/**
 * One chat completion for a task inside the current activity. Paced at the provider's rate limits (it may wait for
 * admission); a 429 is waited out and the request sent again within the same attempt, up to the attempt's rate-limit
 * wait budget, so rate limits use up no attempts. Aborted by the activity's cancellation or the request's deadline.
 * Other failures are mapped to Temporal failures, which decide retries.
 */
export async function sendTaskChat(
  task: AgentTask,
  dependencies: ChatDependencies,
  call: ChatCallOptions = {},
): Promise<AgentCallResult> {
  const model = task.model ?? dependencies.defaultModel;
  const messages = [
    ...(task.system === undefined ? [] : [{ role: 'system' as const, content: task.system }]),
    { role: 'user' as const, content: task.prompt },
  ];
  const request = {
    taskId: task.id,
    model,
    messages,
    ...(task.provider === undefined ? {} : { provider: task.provider }),
    ...(task.promptCache === undefined ? {} : { promptCache: task.promptCache }),
    ...(task.temperature === undefined ? {} : { temperature: task.temperature }),
    ...(task.maxTokens === undefined ? {} : { maxTokens: task.maxTokens }),
    ...(task.promptCacheKey === undefined ? {} : { promptCacheKey: task.promptCacheKey }),
  };
  const { completion, choice, attempt, durationMs, pacing, cached } = await sendChat(request, dependencies, {
    ...call,
    ...((task.cache ?? call.cache) ? { cache: task.cache ?? call.cache } : {}),
  });
  const usage = usageFromChat(completion.usage);
  return {
    output: choice.message.content ?? '',
    finishReason: choice.finish_reason ?? null,
    model: completion.model ?? model,
    usage,
    attempt,
    durationMs,
    ...(completion.service_tier ? { serviceTier: completion.service_tier } : {}),
    ...(pacing ? { pacing } : {}),
    ...(cached ? { cached } : {}),
  };
}
