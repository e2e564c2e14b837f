import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../../contract/failure-types';
import { INLINE_MESSAGE_BYTES, isMessageRef, type ChatMessage, type MessageEntry } from '../../contract/agent-loop';
import type { PayloadRef } from '../../contract/payload-ref';
import type { PayloadStore } from '../../store';
import { runPrefix, storageFailure } from '../model-call';

export type { ChatMessage, MessageEntry } from '../../contract/agent-loop';

/** Most parsed messages a worker keeps in memory, by digest: a step reads the whole transcript, mostly seen before. */
const CACHE_ENTRIES = 10_000;

/**
 * Messages of agents: a transcript is a stored list of its messages, each small one inline and each large one by a
 * reference to its own content-addressed object (MessageEntry). History carries the transcript's reference, one per
 * step, whatever the conversation's size, and a step's small messages inline. So a step of small messages writes one
 * object, its transcript, where a file per message made it four.
 *
 * Transcripts written before small messages went inline are lists of references only: they read the same way.
 */
export class MessageStore {
  private readonly cache = new Map<string, unknown>();

  constructor(private readonly store: PayloadStore) {}

  private remember(digest: string, value: unknown): void {
    if (this.cache.size >= CACHE_ENTRIES) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(digest, value);
  }

  private async putJson(kind: string, value: unknown, text = JSON.stringify(value)): Promise<PayloadRef> {
    try {
      const ref = await this.store.put(`${runPrefix()}/${kind}/m`, text);
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

  /** Stores a message as its own object, whatever its size. */
  putMessage(message: ChatMessage): Promise<PayloadRef> {
    return this.putJson('messages', message);
  }

  getMessage(ref: PayloadRef): Promise<ChatMessage> {
    return this.getJson<ChatMessage>(ref, 'reading an agent message');
  }

  /** A message as a transcript keeps it: itself when small, else stored and referenced. */
  async entry(message: ChatMessage): Promise<MessageEntry> {
    const text = JSON.stringify(message);
    // Characters, not bytes: at most 4 bytes each in UTF-8, so the byte count is measured only near the limit.
    if (text.length <= INLINE_MESSAGE_BYTES / 4 || Buffer.byteLength(text) <= INLINE_MESSAGE_BYTES) return message;
    return this.putJson('messages', message, text);
  }

  /** The message of a transcript entry. */
  read(entry: MessageEntry): Promise<ChatMessage> {
    return isMessageRef(entry) ? this.getMessage(entry) : Promise.resolve(entry);
  }

  putTranscript(entries: MessageEntry[]): Promise<PayloadRef> {
    return this.putJson('transcripts', entries);
  }

  getTranscript(ref: PayloadRef): Promise<MessageEntry[]> {
    return this.getJson<MessageEntry[]>(ref, "reading an agent's transcript");
  }

  /**
   * The assistant message a step's `assistant` reference names (AgentStepBase.assistant): the message's own object, or
   * the transcript it ends.
   */
  async assistant(ref: PayloadRef): Promise<ChatMessage> {
    const value = await this.getJson<ChatMessage | MessageEntry[]>(ref, "reading an agent step's assistant message");
    if (!Array.isArray(value)) return value;
    const last = value.at(-1);
    if (last === undefined)
      throw ApplicationFailure.create({
        type: FailureType.PayloadUnavailable,
        message: `reading an agent step's assistant message: the transcript ${ref.uri} is empty`,
        nonRetryable: true,
      });
    return this.read(last);
  }

  /** Every message of a transcript, in order. */
  async messages(transcript: PayloadRef): Promise<ChatMessage[]> {
    return Promise.all((await this.getTranscript(transcript)).map((entry) => this.read(entry)));
  }
}
