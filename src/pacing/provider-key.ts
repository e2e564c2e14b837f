import { apiKeyId } from './pacer';
import type { PacerKey } from './key-pacer';

/**
 * The limit a call counts against: provider (base URL) + model + API key, as OpenAI scopes its limits (per
 * organisation and model; a key stands for its organisation here). Reads `baseURL` and `apiKey` from an OpenAI client;
 * a client without them (a test double) shares one key per model.
 */
export function pacerKeyOf(llm: object, model: string): PacerKey {
  const baseURL = 'baseURL' in llm && typeof llm.baseURL === 'string' ? llm.baseURL : 'unknown-provider';
  const apiKey = 'apiKey' in llm && typeof llm.apiKey === 'string' ? llm.apiKey : '';
  return { provider: baseURL, model, keyId: apiKeyId(apiKey) };
}
