import type Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { MessagesClient } from './anthropic-messages';
import type { Environment } from '../config/environment';

/** What the agent activity needs from an OpenAI-compatible client: chat completions. */
export type ChatClient = Pick<OpenAI, 'chat'>;

export interface LlmClientOptions {
  /** API key. Default: from the environment, see `providerFromEnvironment`. */
  apiKey?: string;
  /** Base URL of an OpenAI-compatible API (…/v1). Default: from the environment, see `providerFromEnvironment`. */
  baseURL?: string;
}

export const OPENAI_BASE_URL = 'https://api.openai.com/v1';
/** The model of tasks that name none, when FANOUT_MODEL does not say. */
export const DEFAULT_MODEL = 'gpt-4o-mini';

/** The model of tasks that name none: FANOUT_MODEL, else `DEFAULT_MODEL`. */
export function defaultModelFromEnvironment(environment: Environment = process.env): string {
  return environment.FANOUT_MODEL ?? DEFAULT_MODEL;
}

/** Where agent calls go, as the environment says. */
export interface ProviderConfig {
  /** Undefined: OpenAI's API. */
  baseURL: string | undefined;
  apiKey: string;
  /** True when the fallback simulator (FANOUT_SIMULATOR_URL) was chosen. */
  simulated: boolean;
}

/**
 * Reads the provider from OPENAI_API_KEY, OPENAI_BASE_URL and FANOUT_SIMULATOR_URL. Empty values count as unset
 * (compose files pass `${VAR:-}`). The simulator is only a fallback: it is used when neither OPENAI_API_KEY nor
 * OPENAI_BASE_URL is set, so a real key is never sent to it, and an explicit base URL (Ollama, vLLM) always wins.
 * Local servers accept any key, so a missing one is sent as "no-key-set".
 */
export function providerFromEnvironment(environment: Environment = process.env): ProviderConfig {
  const apiKey = environment.OPENAI_API_KEY?.trim() || undefined;
  const baseURL = environment.OPENAI_BASE_URL?.trim() || undefined;
  const simulatorURL = environment.FANOUT_SIMULATOR_URL?.trim() || undefined;
  if (apiKey === undefined && baseURL === undefined && simulatorURL !== undefined) {
    return { baseURL: simulatorURL, apiKey: 'simulator', simulated: true };
  }
  return { baseURL, apiKey: apiKey ?? 'no-key-set', simulated: false };
}

/**
 * Creates the OpenAI client the activities use. Its own retries are off: Temporal owns retries, and two
 * layers would multiply one failure into many calls.
 */
export function createLlmClient(options: LlmClientOptions = {}): ChatClient {
  const provider = providerFromEnvironment();
  return new OpenAI({
    apiKey: options.apiKey ?? provider.apiKey,
    baseURL: options.baseURL ?? provider.baseURL ?? OPENAI_BASE_URL,
    maxRetries: 0,
  });
}

/** Where Claude's calls go, as the environment says: ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY (see `providerFromEnvironment`). */
export function anthropicFromEnvironment(environment: Environment = process.env): ProviderConfig {
  const apiKey = environment.ANTHROPIC_API_KEY?.trim() || undefined;
  const baseURL = environment.ANTHROPIC_BASE_URL?.trim() || undefined;
  const simulatorURL = environment.FANOUT_SIMULATOR_URL?.trim() || undefined;
  // The simulator's URL ends in /v1, as OpenAI's base URLs do; Anthropic's client adds /v1 itself.
  if (apiKey === undefined && baseURL === undefined && simulatorURL !== undefined)
    return { baseURL: simulatorURL.replace(/\/v1\/?$/, ''), apiKey: 'simulator', simulated: true };
  return { baseURL, apiKey: apiKey ?? 'no-key-set', simulated: false };
}

/**
 * Creates the Anthropic client that `claude-*` calls (and those of `provider: "anthropic"`) go through natively. Its
 * own retries are off, as the OpenAI client's are. The SDK is loaded, and the client made, at the first Claude call: a
 * worker that sends none never loads it (a fifth of a second of every worker's start).
 */
export function createAnthropicClient(options: LlmClientOptions = {}): MessagesClient {
  const provider = anthropicFromEnvironment();
  const settings = {
    apiKey: options.apiKey ?? provider.apiKey,
    ...((options.baseURL ?? provider.baseURL) === undefined ? {} : { baseURL: options.baseURL ?? provider.baseURL }),
    maxRetries: 0,
  };
  let client: Anthropic | undefined;
  return {
    get messages() {
      client ??= new (require('@anthropic-ai/sdk') as typeof import('@anthropic-ai/sdk')).default(settings);
      return client.messages;
    },
  };
}
