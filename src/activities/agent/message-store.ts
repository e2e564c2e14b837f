import type { PayloadRef } from '../../contract/payload-ref';
import type { PayloadStore } from '../../store';
import { runPrefix, storageFailure } from '../model-call';

/** A chat message as the OpenAI API takes it (user, system, assistant with tool calls, tool). */
export type ChatMessage = Record<string, unknown> & { role: string };

/** Most parsed messages a worker keeps in memory, by digest: a step reads the whole transcript, mostly seen before. */
const CACHE_ENTRIES = 10_000;

/**
 * Messages of agents in the payload store, by content hash: every message is stored once, as written, and a transcript
 * is a stored list of message references. History carries one reference per step, whatever the conversation's size.
 */
export class MessageStore {
  private readonly cache = new Map<string, unknown>();

  constructor(private readonly store: PayloadStore) {}

  private remember(digest: string, value: unknown): void {
    if (this.cache.size >= CACHE_ENTRIES) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(digest, value);
  }

  private async putJson(kind: string, value: unknown): Promise<PayloadRef> {
    try {
      const ref = await this.store.put(`${runPrefix()}/${kind}/m`, JSON.stringify(value));
      this.remember(ref.sha256, value);
      return ref;
    } catch (error) {
      return storageFailure(error, `storing an agent ${kind === 'messages' ? 'message' : 'transcript'}`);
    }
  }

  private async getJson<T>(ref: PayloadRef, what: string): Promise<T> {
    const cached = this.cache.get(ref.sha256);
    if (cached !== undefined) return cached as T;
    let value: T;
    try {
      value = JSON.parse(await this.store.get(ref)) as T;
    } catch (error) {
      return storageFailure(error, what);
    }
    this.remember(ref.sha256, value);
    return value;
  }

  putMessage(message: ChatMessage): Promise<PayloadRef> {
    return this.putJson('messages', message);
  }

  getMessage(ref: PayloadRef): Promise<ChatMessage> {
    return this.getJson<ChatMessage>(ref, 'reading an agent message');
  }

  putTranscript(refs: PayloadRef[]): Promise<PayloadRef> {
    return this.putJson('transcripts', refs);
  }

  getTranscript(ref: PayloadRef): Promise<PayloadRef[]> {
    return this.getJson<PayloadRef[]>(ref, "reading an agent's transcript");
  }

  /** Every message of a transcript, in order. */
  async messages(transcript: PayloadRef): Promise<ChatMessage[]> {
    return Promise.all((await this.getTranscript(transcript)).map((ref) => this.getMessage(ref)));
  }
}
