import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { z } from 'zod';

/** The origins of a local dev server's Web UI. */
export const DEFAULT_CODEC_CORS_ORIGINS = ['http://localhost:8233', 'http://127.0.0.1:8233'] as const;

/** Options of a codec server. */
export interface CodecServerOptions {
  /** The codec that encodes and decodes. */
  codec: PayloadCodec;
  /** Address to listen on; default 127.0.0.1. Whoever reaches the server can decrypt, so keep it private. */
  host?: string;
  /** Port; default 8888, 0 for a free one. */
  port?: number;
  /**
   * Browser origins allowed to call (the Web UI's, e.g. http://localhost:8233); `*` allows any. Requests without an
   * Origin header (the Temporal CLI's `--codec-endpoint`, curl) are always served. Default DEFAULT_CODEC_CORS_ORIGINS.
   */
  corsOrigins?: readonly string[];
  /** Largest request body, bytes; default 32 MiB (a request can carry many 2 MB payloads). */
  maxBodyBytes?: number;
  /** Called with one line per request served or refused; default none. */
  log?: (line: string) => void;
}

/** A running codec server. */
export interface CodecServer {
  /** Base URL to give the UI (`--ui-codec-endpoint`) or the CLI (`--codec-endpoint`). */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/**
 * The body of /encode and /decode: proto3 JSON of Payloads, so each metadata value and the data are base64.
 * Unknown fields (a newer SDK's) are ignored.
 */
const payloadsBody = z.object({
  payloads: z.array(
    z.object({
      metadata: z.record(z.string(), z.string()).nullish(),
      data: z.string().nullish(),
    }),
  ),
});

type JsonPayload = { metadata: Record<string, string>; data: string };

const ALLOWED_HEADERS = 'Content-Type, X-Namespace, Authorization';

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function fromJson(payload: z.infer<typeof payloadsBody>['payloads'][number]): Payload {
  const metadata: Record<string, Uint8Array> = {};
  for (const [key, value] of Object.entries(payload.metadata ?? {})) metadata[key] = Buffer.from(value, 'base64');
  return { metadata, data: Buffer.from(payload.data ?? '', 'base64') };
}

function toJson(payload: Payload): JsonPayload {
  const metadata: Record<string, string> = {};
  for (const [key, value] of Object.entries(payload.metadata ?? {}))
    metadata[key] = Buffer.from(value).toString('base64');
  return { metadata, data: Buffer.from(payload.data ?? new Uint8Array()).toString('base64') };
}

function normaliseOrigin(origin: string): string {
  return origin.trim().replace(/\/+$/, '').toLowerCase();
}

async function readBody(request: IncomingMessage, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new HttpError(413, `request body over ${limit} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function send(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = body === undefined ? '' : JSON.stringify(body);
  response.writeHead(status, {
    ...headers,
    ...(text === '' ? {} : { 'Content-Type': 'application/json' }),
    'Content-Length': String(Buffer.byteLength(text)),
    'Cache-Control': 'no-store',
  });
  response.end(text);
}

/**
 * Serves Temporal's remote codec protocol over HTTP, so the Web UI and `temporal --codec-endpoint` can show payloads
 * that workers and clients encrypted: `POST <prefix>/decode` and `POST <prefix>/encode` take and return
 * `{"payloads": [{"metadata": {"<key>": "<base64>"}, "data": "<base64>"}]}`. Any prefix is accepted, so the CLI's
 * `http://host:port/{namespace}` endpoint template works too.
 *
 * The UI calls from the browser with `Content-Type: application/json` and `X-Namespace`, which makes every call
 * preflighted; it may send credentials, so an allowed origin is echoed (never `*`) with Allow-Credentials.
 *
 * @example
 * const server = await startCodecServer({ codec: codecFromEnvironment()!, corsOrigins: ['http://localhost:8233'] });
 */
export async function startCodecServer(options: CodecServerOptions): Promise<CodecServer> {
  const { codec, host = '127.0.0.1', port = 8888, maxBodyBytes = 32 * 1024 * 1024, log = () => undefined } = options;
  const origins = new Set((options.corsOrigins ?? DEFAULT_CODEC_CORS_ORIGINS).map(normaliseOrigin));
  const anyOrigin = origins.has('*');

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const origin = request.headers.origin;
    const path = new URL(request.url ?? '/', 'http://codec').pathname;
    const namespace = request.headers['x-namespace'];
    const who = `${origin ? `origin ${origin}` : 'no origin'}${typeof namespace === 'string' ? `, namespace ${namespace}` : ''}`;
    // A browser page from any other origin gets nothing decoded, not even an opaque response's side effects.
    if (origin !== undefined && !anyOrigin && !origins.has(normaliseOrigin(origin))) {
      log(`refused ${request.method} ${path} from ${who}: origin not allowed (--cors-origin)`);
      send(response, 403, {
        message: `origin ${origin} is not allowed; start the codec server with --cors-origin ${origin}`,
      });
      return;
    }
    const cors: Record<string, string> =
      origin === undefined
        ? {}
        : { 'Access-Control-Allow-Origin': origin, 'Access-Control-Allow-Credentials': 'true', Vary: 'Origin' };
    const operation = /\/(encode|decode)$/.exec(path)?.[1] as 'encode' | 'decode' | undefined;

    if (request.method === 'OPTIONS') {
      send(response, 204, undefined, {
        ...cors,
        'Access-Control-Allow-Methods': 'POST, OPTIONS',
        'Access-Control-Allow-Headers': ALLOWED_HEADERS,
        'Access-Control-Max-Age': '600',
        // Chrome asks before a public page reaches a private address; a UI on such a page is still the user's.
        ...(request.headers['access-control-request-private-network'] === 'true'
          ? { 'Access-Control-Allow-Private-Network': 'true' }
          : {}),
      });
      return;
    }
    if (operation === undefined) {
      send(response, 404, { message: `unknown path ${path}; POST to /encode or /decode` }, cors);
      return;
    }
    if (request.method !== 'POST') {
      send(
        response,
        405,
        { message: `${request.method} is not allowed; POST to ${path}` },
        { ...cors, Allow: 'POST, OPTIONS' },
      );
      return;
    }
    try {
      const text = await readBody(request, maxBodyBytes);
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new HttpError(400, 'the body is not JSON; expected {"payloads": [...]}');
      }
      const parsed = payloadsBody.safeParse(json);
      if (!parsed.success)
        throw new HttpError(
          400,
          `expected {"payloads": [{"metadata": {...}, "data": "<base64>"}]}: ${parsed.error.issues[0]?.message}`,
        );
      const payloads = parsed.data.payloads.map(fromJson);
      let converted: Payload[];
      try {
        converted = operation === 'encode' ? await codec.encode(payloads) : await codec.decode(payloads);
      } catch (error) {
        throw new HttpError(400, error instanceof Error ? error.message : String(error));
      }
      log(`${operation} ${payloads.length} payload(s) for ${who}`);
      send(response, 200, { payloads: converted.map(toJson) }, cors);
    } catch (error) {
      const status = error instanceof HttpError ? error.status : 500;
      const message = error instanceof Error ? error.message : String(error);
      log(`failed ${operation} for ${who}: ${status} ${message}`);
      send(response, status, { message }, cors);
    }
  }

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) send(response, 500, { message: String(error) });
      else response.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${bound}`,
    port: bound,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
