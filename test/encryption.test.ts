import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { NativeConnection, type Worker } from '@temporalio/worker';
import type { Browser } from 'playwright-core';
import { createLlmClient } from '../src/llm/llm-client';
import { FanoutClient } from '../src/client/fanout-client';
import {
  codecFromEnvironment,
  dataConverterFromEnvironment,
  EncryptionCodec,
  encryptionKeysFromEnvironment,
  startCodecServer,
  type CodecServer,
} from '../src/codec';
import { freePort } from '../src/local/free-port';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { createFanoutWorker } from '../src/worker';
import { launchChromium } from './support/browser';
import { spawnCodecServer, spawnDevServerWithCodec, runTemporalCli, type RunningProcess } from './support/codec-stack';
import { screenshotPath } from './support/screenshots';
import { runCli } from './support/processes';
import { uniqueName } from './support/test-stack';

const newKey = () => randomBytes(32);
const text = (bytes: Uint8Array | null | undefined) => Buffer.from(bytes ?? new Uint8Array()).toString('utf8');
const toPayload = (value: unknown): Payload => defaultPayloadConverter.toPayload(value);

describe('the encryption codec', () => {
  const k1 = { id: 'k1', key: newKey() };
  const k2 = { id: 'k2', key: newKey() };

  it('round-trips a payload and stores neither its value nor its original encoding in clear', async () => {
    const codec = new EncryptionCodec([k1]);
    const [encrypted] = await codec.encode([toPayload({ prompt: 'secret plan for the heron' })]);
    expect(text(encrypted.metadata?.encoding)).toBe('binary/encrypted');
    expect(text(encrypted.metadata?.['encryption-key-id'])).toBe('k1');
    expect(Object.keys(encrypted.metadata ?? {}).sort()).toEqual(['encoding', 'encryption-key-id']);
    expect(Buffer.from(encrypted.data ?? []).toString('latin1')).not.toContain('heron');
    const [decoded] = await codec.decode([encrypted]);
    expect(defaultPayloadConverter.fromPayload(decoded)).toEqual({ prompt: 'secret plan for the heron' });
  });

  it('encrypts one value twice to different bytes: a fresh IV per payload', async () => {
    const codec = new EncryptionCodec([k1]);
    const [first, second] = await codec.encode([toPayload('same'), toPayload('same')]);
    expect(
      Buffer.from(first.data ?? [])
        .subarray(0, 12)
        .equals(Buffer.from(second.data ?? []).subarray(0, 12)),
    ).toBe(false);
    expect(Buffer.from(first.data ?? []).equals(Buffer.from(second.data ?? []))).toBe(false);
  });

  it('reads payloads written with a retired key after rotation, and writes new ones with the current key', async () => {
    const before = new EncryptionCodec([k1]);
    const [old] = await before.encode([toPayload('written before rotation')]);

    const after = new EncryptionCodec([k2, k1]);
    const [decodedOld] = await after.decode([old]);
    expect(defaultPayloadConverter.fromPayload(decodedOld)).toBe('written before rotation');
    const [fresh] = await after.encode([toPayload('written after rotation')]);
    expect(text(fresh.metadata?.['encryption-key-id'])).toBe('k2');

    // Once k1 is dropped, its payloads fail with a message that names the missing key.
    await expect(new EncryptionCodec([k2]).decode([old])).rejects.toThrow(
      /key "k1", which is not configured \(known: k2\)/,
    );
  });

  it('rejects a payload whose ciphertext or key id was altered', async () => {
    const codec = new EncryptionCodec([k2, k1]);
    const [encrypted] = await codec.encode([toPayload('do not touch')]);
    const flipped = Buffer.from(encrypted.data ?? []);
    flipped[20] ^= 1;
    await expect(codec.decode([{ ...encrypted, data: flipped }])).rejects.toThrow(
      /failed authentication with key "k2"/,
    );
    // The key id is authenticated too: relabelling a payload as another key's does not decrypt.
    const relabelled = { ...encrypted, metadata: { ...encrypted.metadata, 'encryption-key-id': Buffer.from('k1') } };
    await expect(codec.decode([relabelled])).rejects.toThrow(/failed authentication with key "k1"/);
  });

  it('passes payloads that are not encrypted through decode unchanged', async () => {
    const plain = toPayload({ written: 'before encryption was turned on' });
    const [decoded] = await new EncryptionCodec([k1]).decode([plain]);
    expect(decoded).toBe(plain);
  });
});

describe('encryption keys from the environment', () => {
  const base64 = (bytes: Buffer) => bytes.toString('base64');
  const a = newKey();
  const b = newKey();

  it('is off when no key is configured', () => {
    expect(codecFromEnvironment({})).toBeUndefined();
    expect(dataConverterFromEnvironment({ FANOUT_ENCRYPTION_KEYS: ' ' })).toBeUndefined();
  });

  it('encrypts with the first key of FANOUT_ENCRYPTION_KEYS and decrypts with all of them', () => {
    const codec = codecFromEnvironment({ FANOUT_ENCRYPTION_KEYS: `k2:${base64(b)}, k1:${base64(a)}` });
    expect(codec?.encryptingKeyId).toBe('k2');
    expect(codec?.keyIds).toEqual(['k2', 'k1']);
    expect(dataConverterFromEnvironment({ FANOUT_ENCRYPTION_KEYS: `k2:${base64(b)}` })?.payloadCodecs).toHaveLength(1);
  });

  it('reads one key from FANOUT_ENCRYPTION_KEY with its FANOUT_ENCRYPTION_KEY_ID', () => {
    const keys = encryptionKeysFromEnvironment({ FANOUT_ENCRYPTION_KEY: base64(a), FANOUT_ENCRYPTION_KEY_ID: 'only' });
    expect(keys?.map((key) => key.id)).toEqual(['only']);
    expect(Buffer.from(keys?.[0].key ?? []).equals(a)).toBe(true);
  });

  it.each([
    [
      'a 16-byte key',
      { FANOUT_ENCRYPTION_KEYS: `k1:${base64(randomBytes(16))}` },
      /FANOUT_ENCRYPTION_KEYS: key "k1" must be 32 bytes for AES-256, got 16/,
    ],
    [
      'a key with a character outside base64',
      { FANOUT_ENCRYPTION_KEYS: `k1:-${base64(a).slice(1)}` },
      /FANOUT_ENCRYPTION_KEYS: key "k1" is not valid base64/,
    ],
    [
      'a key without an id',
      { FANOUT_ENCRYPTION_KEYS: base64(a) },
      /FANOUT_ENCRYPTION_KEYS: entry 1 must be "<id>:<base64 key>"/,
    ],
    [
      'one id twice',
      { FANOUT_ENCRYPTION_KEYS: `k1:${base64(a)},k1:${base64(b)}` },
      /FANOUT_ENCRYPTION_KEYS: key id "k1" is listed twice/,
    ],
    [
      'FANOUT_ENCRYPTION_KEY without an id',
      { FANOUT_ENCRYPTION_KEY: base64(a) },
      /FANOUT_ENCRYPTION_KEY_ID must be set with FANOUT_ENCRYPTION_KEY/,
    ],
    [
      'a short FANOUT_ENCRYPTION_KEY',
      { FANOUT_ENCRYPTION_KEY: 'short', FANOUT_ENCRYPTION_KEY_ID: 'x' },
      /FANOUT_ENCRYPTION_KEY: key "x"/,
    ],
    [
      'both forms at once',
      { FANOUT_ENCRYPTION_KEYS: `k1:${base64(a)}`, FANOUT_ENCRYPTION_KEY: base64(b) },
      /either FANOUT_ENCRYPTION_KEYS or FANOUT_ENCRYPTION_KEY/,
    ],
  ])('rejects %s with an error that names the variable', (_case, environment, message) => {
    expect(() => codecFromEnvironment(environment)).toThrow(message);
  });

  it('never puts a key into an error message', () => {
    const key = base64(randomBytes(31));
    let message = '';
    try {
      codecFromEnvironment({ FANOUT_ENCRYPTION_KEYS: `k1:${key}` });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain('must be 32 bytes');
    expect(message).not.toContain(key);
  });
});

describe('the codec server over HTTP', () => {
  const origin = 'http://127.0.0.1:8233';
  const codec = new EncryptionCodec([{ id: 'k1', key: newKey() }]);
  let server: CodecServer;

  beforeAll(async () => {
    server = await startCodecServer({ codec, port: 0, corsOrigins: [origin] });
  });
  afterAll(() => server?.close());

  const post = (route: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${route}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  const asJson = (payload: Payload) => ({
    metadata: Object.fromEntries(
      Object.entries(payload.metadata ?? {}).map(([key, value]) => [key, Buffer.from(value).toString('base64')]),
    ),
    data: Buffer.from(payload.data ?? []).toString('base64'),
  });

  it("answers the UI's preflight for an allowed origin: credentials allowed, X-Namespace accepted", async () => {
    const response = await fetch(`${server.url}/decode`, {
      method: 'OPTIONS',
      headers: {
        Origin: origin,
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'content-type,x-namespace',
      },
    });
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe(origin);
    expect(response.headers.get('access-control-allow-credentials')).toBe('true');
    expect(response.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('x-namespace');
    expect(response.headers.get('access-control-allow-methods')).toContain('POST');
  });

  it('refuses to decode for a browser page of another origin', async () => {
    const [encrypted] = await codec.encode([toPayload('for the UI only')]);
    const response = await post('/decode', { payloads: [asJson(encrypted)] }, { Origin: 'http://evil.example' });
    expect(response.status).toBe(403);
    expect(response.headers.get('access-control-allow-origin')).toBeNull();
    expect(await response.text()).not.toContain('for the UI only');
  });

  it('decodes what it encoded, under any path prefix (the CLI sends /{namespace}/decode)', async () => {
    const encodeResponse = await post(
      '/encode',
      { payloads: [asJson(toPayload({ note: 'round trip' }))] },
      { Origin: origin, 'X-Namespace': 'default' },
    );
    expect(encodeResponse.status).toBe(200);
    expect(encodeResponse.headers.get('access-control-allow-origin')).toBe(origin);
    const encoded = (await encodeResponse.json()) as { payloads: { metadata: Record<string, string>; data: string }[] };
    expect(Buffer.from(encoded.payloads[0].metadata.encoding, 'base64').toString()).toBe('binary/encrypted');

    const decodeResponse = await post('/default/decode', encoded);
    expect(decodeResponse.status).toBe(200);
    const decoded = (await decodeResponse.json()) as { payloads: { metadata: Record<string, string>; data: string }[] };
    expect(Buffer.from(decoded.payloads[0].metadata.encoding, 'base64').toString()).toBe('json/plain');
    expect(JSON.parse(Buffer.from(decoded.payloads[0].data, 'base64').toString())).toEqual({ note: 'round trip' });
  });

  it('answers 400 for a body that is not payloads, 404 for other paths and 405 for other methods', async () => {
    expect((await post('/decode', { nope: true })).status).toBe(400);
    const wrongKey = await new EncryptionCodec([{ id: 'other', key: newKey() }]).encode([toPayload('x')]);
    const unknownKey = await post('/decode', { payloads: wrongKey.map(asJson) });
    expect(unknownKey.status).toBe(400);
    expect(((await unknownKey.json()) as { message: string }).message).toContain('key "other"');
    expect((await post('/elsewhere', { payloads: [] })).status).toBe(404);
    expect((await fetch(`${server.url}/decode`)).status).toBe(405);
  });

  it('`fanout codec-server` refuses to start without a key', async () => {
    const { code, stderr } = await runCli(['codec-server', '--port', '0'], {
      FANOUT_ENCRYPTION_KEYS: '',
      FANOUT_ENCRYPTION_KEY: '',
      FANOUT_ENCRYPTION_KEY_ID: '',
    });
    expect(code).toBe(2);
    expect(stderr).toContain('no encryption key is configured: set FANOUT_ENCRYPTION_KEYS');
  });
});

/** Every payload object ({metadata, data}) anywhere in a JSON document. */
function payloadsIn(value: unknown, found: { metadata: Record<string, string>; data?: string }[] = []) {
  if (Array.isArray(value)) for (const item of value) payloadsIn(item, found);
  else if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    if (record.metadata && typeof record.metadata === 'object' && 'encoding' in record.metadata) {
      found.push(record as { metadata: Record<string, string>; data?: string });
    }
    for (const child of Object.values(record)) payloadsIn(child, found);
  }
  return found;
}

/** Every string in a JSON document, and each one read as base64 too. */
function stringsIn(value: unknown, found: string[] = []): string[] {
  if (typeof value === 'string') found.push(value, Buffer.from(value, 'base64').toString('latin1'));
  else if (Array.isArray(value)) for (const item of value) stringsIn(item, found);
  else if (value !== null && typeof value === 'object')
    for (const child of Object.values(value)) stringsIn(child, found);
  return found;
}

describe('an encrypted fan-out', () => {
  // Distinctive words that can only reach history through the prompts and the simulator's answers to them.
  const prompts = ['Summarise the zebra-quokka treaty of 1887', 'List three uses for periwinkle lighthouse marmalade'];
  const secrets = ['zebra-quokka', 'periwinkle', 'marmalade', '[simulated]'];
  const environment = { FANOUT_ENCRYPTION_KEYS: `k2:${newKey().toString('base64')},k1:${newKey().toString('base64')}` };
  const codec = codecFromEnvironment(environment) as EncryptionCodec;

  let codecServer: RunningProcess & { url: string };
  let server: RunningProcess & { address: string; uiUrl: string };
  let simulator: Simulator;
  let connection: Connection;
  let nativeConnection: NativeConnection;
  let worker: Worker;
  let running: Promise<void>;
  let fanout: FanoutClient;
  let browser: Browser | undefined;
  let workflowId: string;
  let results: { output?: string }[];

  beforeAll(async () => {
    const uiPort = await freePort();
    codecServer = await spawnCodecServer(['--cors-origin', `http://127.0.0.1:${uiPort}`], environment);
    server = await spawnDevServerWithCodec({ uiPort, codecEndpoint: codecServer.url });
    simulator = await startSimulator({ latency: { minMs: 20, maxMs: 40 } });
    connection = await Connection.connect({ address: server.address });
    nativeConnection = await NativeConnection.connect({ address: server.address });
    const taskQueue = uniqueName('tq-encrypted');
    worker = await createFanoutWorker({
      connection: nativeConnection,
      taskQueue,
      dataConverter: dataConverterFromEnvironment(environment),
      activities: { llm: createLlmClient({ baseURL: simulator.baseUrl, apiKey: 'test-key' }) },
    });
    running = worker.run();
    fanout = await FanoutClient.connect({
      client: new Client({ connection, dataConverter: dataConverterFromEnvironment(environment) }),
      taskQueue,
    });

    workflowId = uniqueName('encrypted');
    const result = await fanout.runParallel(
      prompts.map((prompt, index) => ({ id: `agent-${index + 1}`, prompt })),
      {},
      { workflowId, summary: 'Encrypted fan-out of 2 agents' },
    );
    results = result.results;
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    if (worker?.getState() === 'RUNNING') worker.shutdown();
    await running;
    await nativeConnection?.close();
    await connection?.close();
    await simulator?.close();
    await server?.stop();
    await codecServer?.stop();
  });

  /** The run's history as the plain temporal CLI shows it (JSON), with `flags` added. */
  const showHistory = (...flags: string[]) =>
    runTemporalCli([
      'workflow',
      'show',
      '--workflow-id',
      workflowId,
      '--address',
      server.address,
      '--output',
      'json',
      ...flags,
    ]);

  it('returns decrypted outputs to a client that has the key', () => {
    expect(results.map((result) => result.output)).toEqual(prompts.map((prompt) => `[simulated] answer to: ${prompt}`));
  });

  it('leaves no prompt or output in clear, nor in base64, in history read with the plain temporal CLI', async () => {
    const { code, stdout, stderr } = await showHistory();
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    const history = JSON.parse(stdout) as unknown;
    const everything = stringsIn(history).join('\n').toLowerCase();
    for (const secret of secrets) expect(everything).not.toContain(secret.toLowerCase());

    // The history does hold them, encrypted: every payload is ciphertext, and the key reveals the prompts in it.
    const payloads = payloadsIn(history);
    expect(payloads.length).toBeGreaterThanOrEqual(5);
    const encodings = new Set(payloads.map((payload) => Buffer.from(payload.metadata.encoding, 'base64').toString()));
    expect([...encodings]).toEqual(['binary/encrypted']);
    const decrypted = await codec.decode(
      payloads.map((payload) => ({
        metadata: Object.fromEntries(
          Object.entries(payload.metadata).map(([key, value]) => [key, Buffer.from(value, 'base64')]),
        ),
        data: Buffer.from(payload.data ?? '', 'base64'),
      })),
    );
    const clear = decrypted.map((payload) => text(payload.data)).join('\n');
    for (const prompt of prompts) expect(clear).toContain(prompt);
  });

  it('shows the prompts to the temporal CLI pointed at the codec server', async () => {
    const { code, stdout } = await showHistory('--codec-endpoint', codecServer.url);
    expect(code).toBe(0);
    // The CLI shows decoded payloads as base64 of their JSON, like any payload.
    const decoded = stringsIn(JSON.parse(stdout)).join('\n');
    for (const prompt of prompts) expect(decoded).toContain(prompt);
  });

  it('keeps the result from a client without the key', async () => {
    const plain = new Client({ connection });
    await expect(plain.workflow.getHandle(workflowId).result()).rejects.toThrow(/binary\/encrypted/);
  });

  it('shows the decrypted prompts in the Temporal UI pointed at the codec server', async () => {
    browser = await launchChromium();
    const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
    await page.goto(`${server.uiUrl}/namespaces/default/workflows/${workflowId}`);
    await page.getByText('Encrypted fan-out of 2 agents').first().waitFor({ timeout: 30_000 });
    await page.getByText('zebra-quokka treaty', { exact: false }).first().waitFor({ timeout: 30_000 });
    await page.getByText('periwinkle lighthouse marmalade', { exact: false }).first().waitFor({ timeout: 30_000 });
    await page.screenshot({ path: screenshotPath('temporal-ui-decoded.png'), fullPage: true });
    await page.close();
    // The browser, not the UI's server, asked the codec server, from the UI's origin and for its namespace.
    expect(codecServer.output()).toMatch(
      /decode \d+ payload\(s\) for origin http:\/\/127\.0\.0\.1:\d+, namespace default/,
    );
  });
});
