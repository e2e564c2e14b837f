/**
 * How many tokens a request will count against a tokens-per-minute limit before it is answered. OpenAI documents
 * its own estimate as about four characters per token of the prompt, plus `max_tokens` (what the answer may use).
 * A task without `maxTokens` reserves `defaultCompletionTokens` for its answer; what an answer did not use is given
 * back when it arrives (see KeyPacer).
 */
export function estimateRequestTokens(
  messages: readonly { content?: unknown }[],
  maxTokens: number | undefined,
  defaultCompletionTokens: number,
): { promptTokens: number; reservedTokens: number } {
  const characters = messages.reduce(
    (sum, message) => sum + (typeof message.content === 'string' ? message.content.length : 0),
    0,
  );
  const promptTokens = Math.ceil(characters / 4);
  return { promptTokens, reservedTokens: promptTokens + (maxTokens ?? defaultCompletionTokens) };
}
