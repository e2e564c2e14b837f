import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { MessageStore, type ChatMessage } from '../src/activities/agent/message-store';
import { INLINE_MESSAGE_BYTES, isMessageRef } from '../src/contract/agent-loop';
import type { PayloadRef } from '../src/contract/payload-ref';
import { FileStorage, PayloadStore, type ObjectStorage } from '../src/store';
import { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import { createToolCall } from '../src/activities/agent/tool-call';
import { FailureType } from '../src/contract/failure-types';
import { defineTool } from '../src/tools/define-tool';
import { ToolRegistry } from '../src/tools/registry';
import { activityEnvironment } from './support/activity-environment';
import { rejectionOf } from './support/rejection';

let root: string;
let writes: number;

/** Local files, counting whole-object writes. */
function countingStorage(): ObjectStorage {
  const storage = new FileStorage();
  const write = storage.write.bind(storage);
  storage.write = (uri, data, options) => {
    writes += 1;
    return write(uri, data, options);
  };
  return storage;
}

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), 'message-store-'));
  writes = 0;
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

/** Runs `work` as an activity of one workflow (the store keys its objects by the run). */
function inActivity<T>(work: () => Promise<T>): Promise<T> {
  return activityEnvironment({ workflowExecution: { workflowId: 'agent-1', runId: 'run-1' } }).run(work);
}

const large: ChatMessage = { role: 'tool', tool_call_id: 'call_1', content: 'x'.repeat(INLINE_MESSAGE_BYTES) };

describe('the agent message store', () => {
  it('keeps small messages inline in a transcript and stores a large one by reference, in one write each', async () => {
    const store = new MessageStore(new PayloadStore(countingStorage(), root));
    const user: ChatMessage = { role: 'user', content: 'hello' };
    const assistant: ChatMessage = { role: 'assistant', content: 'hi' };
    const transcript = await inActivity(async () => {
      const entries = [await store.entry(user), await store.entry(large), await store.entry(assistant)];
      expect(entries.map((entry) => isMessageRef(entry))).toEqual([false, true, false]);
      return store.putTranscript(entries);
    });
    expect(writes).toBe(2); // the large message, then the transcript

    // A worker that has not seen them (no cache) reads them back from the store.
    const fresh = new MessageStore(new PayloadStore(new FileStorage(), root));
    expect(await inActivity(() => fresh.messages(transcript))).toEqual([user, large, assistant]);
    // A step's assistant reference may name the transcript the reply ends.
    expect(await inActivity(() => fresh.assistant(transcript))).toEqual(assistant);
  });

  it('reads a transcript written before small messages went inline: every message by reference', async () => {
    const store = new MessageStore(new PayloadStore(new FileStorage(), root));
    const messages: ChatMessage[] = [
      { role: 'user', content: 'hello' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'search', arguments: '{"q":"x"}' } }],
      },
    ];
    const { transcript, assistantRef } = await inActivity(async () => {
      const refs: PayloadRef[] = await Promise.all(messages.map((message) => store.putMessage(message)));
      return { transcript: await store.putTranscript(refs), assistantRef: refs[1] };
    });

    const fresh = new MessageStore(new PayloadStore(new FileStorage(), root));
    expect(await inActivity(() => fresh.messages(transcript))).toEqual(messages);
    expect(await inActivity(() => fresh.assistant(assistantRef))).toEqual(messages[1]);
  });
});

describe('a tool call given the call itself', () => {
  /** Local files, counting every read and write. */
  function watchedStorage(): { storage: ObjectStorage; touched: () => number } {
    const storage = new FileStorage();
    let touched = 0;
    for (const method of ['read', 'readRange', 'write', 'size'] as const) {
      const original = storage[method].bind(storage) as (...args: unknown[]) => Promise<unknown>;
      (storage as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
        touched += 1;
        return original(...args);
      };
    }
    return { storage, touched: () => touched };
  }

  const echo = defineTool({
    name: 'echo',
    description: 'Echoes its text',
    input: z.object({ text: z.string() }),
    run: ({ text }) => `echo: ${text}`,
  });

  it('runs it from its inline arguments without touching the store, and refuses an input that names neither', async () => {
    const { storage, touched } = watchedStorage();
    const payloads = new PayloadStore(storage, root);
    const toolCall = createToolCall({
      store: payloads,
      tools: new ToolRegistry([echo]),
      messages: new MessageStore(payloads),
    });
    const result = await inActivity(() =>
      toolCall({
        taskId: 'agent-1',
        step: 1,
        index: 0,
        inlineCall: { id: 'call_1_1', name: 'echo', arguments: '{"text":"hi"}' },
      }),
    );
    expect(result).toMatchObject({
      ok: true,
      message: { role: 'tool', tool_call_id: 'call_1_1', content: 'echo: hi' },
    });
    expect(touched()).toBe(0);

    const refused = await rejectionOf(
      inActivity(() => toolCall({ taskId: 'agent-1', step: 1, index: 0 })),
      ApplicationFailure,
    );
    expect(refused).toMatchObject({ type: FailureType.InvalidInput, nonRetryable: true });
    expect(refused.message).toContain('names neither the call nor the stored message');
  });
});
