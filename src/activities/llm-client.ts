import OpenAI from 'openai';

/** What the agent activity needs from an OpenAI-compatible client: chat completions. */
export type ChatClient = Pick<OpenAI, 'chat'>;

export interface LlmClientOptions {
  /** API key. Default: OPENAI_API_KEY. Local servers (the simulator, Ollama) accept any value. */
  apiKey?: string;
  /** Base URL of an OpenAI-compatible API (…/v1). Default: OPENAI_BASE_URL, else OpenAI's. */
  baseURL?: string;
}

/**
 * Creates the OpenAI client the activities use. Its own retries are off: Temporal owns retries, and two
 * layers would multiply one failure into many calls.
 */
export function createLlmClient(options: LlmClientOptions = {}): ChatClient {
  return new OpenAI({
    apiKey: options.apiKey ?? process.env.OPENAI_API_KEY ?? 'no-key-set',
    baseURL: options.baseURL ?? process.env.OPENAI_BASE_URL ?? undefined,
    maxRetries: 0,
  });
}
