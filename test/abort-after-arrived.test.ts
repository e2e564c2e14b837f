import http from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { deadlineSignal } from '../src/llm/cancellation';
import { waitFor } from './support/wait-for';

/**
 * A cancel that lands as an answer arrives: the provider has sent (and billed) the answer, and it sits in the worker's
 * socket when the abort comes. Here the server aborts the caller's signal right after writing its answer, so the answer
 * is in the socket before the client has read a byte of it.
 */
describe('a request aborted as its answer arrives', () => {
  let server: http.Server;
  let baseURL: string;
  let abortOnAnswer: AbortController | undefined;
  let answered = 0;
  let hanging = 0;

  beforeAll(async () => {
    server = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        // Never answers: a call really in flight.
        if (request.url?.includes('hang')) {
          hanging += 1;
          return;
        }
        answered += 1;
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(
          JSON.stringify({
            id: 'c',
            object: 'chat.completion',
            created: 0,
            model: 'm',
            choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'the answer' } }],
            usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
          }),
        );
        abortOnAnswer?.abort(new Error('cancelled'));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const ask = (signal: AbortSignal, path = '') =>
    new OpenAI({ apiKey: 'k', baseURL: `${baseURL}${path}`, maxRetries: 0 }).chat.completions.create(
      { model: 'm', messages: [{ role: 'user', content: 'q' }] },
      { signal },
    );

  it('keeps the answer when the abort comes after it arrived (afterArrived)', async () => {
    abortOnAnswer = new AbortController();
    const request = deadlineSignal(abortOnAnswer.signal, 10_000, { afterArrived: true });
    const before = answered;
    const completion = await ask(request.signal);
    request.clear();
    expect(answered).toBe(before + 1);
    expect(abortOnAnswer.signal.aborted).toBe(true);
    expect(completion.choices[0].message.content).toBe('the answer');
  });

  it('loses that answer when the abort is passed on at once (why afterArrived exists)', async () => {
    abortOnAnswer = new AbortController();
    const request = deadlineSignal(abortOnAnswer.signal, 10_000);
    const before = answered;
    await expect(ask(request.signal)).rejects.toThrow();
    request.clear();
    expect(answered).toBe(before + 1);
  });

  it('still aborts a request that has no answer yet at once', async () => {
    abortOnAnswer = undefined;
    const cancel = new AbortController();
    const request = deadlineSignal(cancel.signal, 10_000, { afterArrived: true });
    const before = hanging;
    const call = ask(request.signal, '/hang');
    await waitFor('the request to reach the server', () => hanging > before);
    const abortedAt = Date.now();
    cancel.abort(new Error('cancelled'));
    await expect(call).rejects.toThrow();
    request.clear();
    expect(Date.now() - abortedAt).toBeLessThan(1000);
  });
});
