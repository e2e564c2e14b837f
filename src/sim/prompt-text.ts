/** A `[sim key=value …]` marker: directions to the simulator, which its answers leave out when they quote a prompt. */
const ANY_MARKER = /\[sim(?:\s+[a-z-]+=[^\s\]]+)+\s*\]/g;

/** The simulator's token count: whitespace-separated words. */
export function countTokens(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

/** The prompt as a simulated answer quotes it: without its markers, at most 80 characters. */
export function quotedPrompt(prompt: string): string {
  return prompt.replace(ANY_MARKER, '').trim().slice(0, 80);
}
