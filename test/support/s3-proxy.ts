import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startS3Server, type S3Server } from '../../src/local/s3-server';
import { Storage } from '../../src/store';

/** One request the proxy passed on: what it was, when it came and went, and whether its answer was dropped. */
export interface ProxiedRequest {
  readonly method: string;
  readonly path: string;
  readonly arrivedAt: number;
  /** When the upstream server had answered (the write had landed); undefined while it is still open. */
  answeredAt?: number;
  /** The upstream's status. */
  status?: number;
  /** The answer was read from the upstream and then the client's connection closed instead of passing it on. */
  dropped: boolean;
}

/** What the proxy does with one request: pass it on (after `delayMs`), or pass it on and drop the answer. */
export interface ProxyRule {
  delayMs?: number;
  dropAnswer?: boolean;
}

/** An HTTP proxy in front of an S3 server, for writes that land and whose answer is lost, and for a slow S3. */
export interface S3Proxy {
  /** `http://127.0.0.1:PORT`: give it as FANOUT_S3_ENDPOINT in place of the server's. */
  readonly endpoint: string;
  readonly requests: ProxiedRequest[];
  /** Sets what happens to each request from now on (by default, every request passes untouched). */
  setRule(rule: (method: string, path: string) => ProxyRule): void;
  close(): Promise<void>;
}

/**
 * Starts a proxy to the S3 server at `upstream` (its endpoint). Requests keep their headers (the Host the client
 * signed included), so signatures still match.
 */
export async function startS3Proxy(upstream: string): Promise<S3Proxy> {
  const target = new URL(upstream);
  const requests: ProxiedRequest[] = [];
  let rule: (method: string, path: string) => ProxyRule = () => ({});
  const held = new Set<NodeJS.Timeout>();
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const record: ProxiedRequest = {
        method: request.method ?? 'GET',
        path: request.url ?? '/',
        arrivedAt: Date.now(),
        dropped: false,
      };
      requests.push(record);
      const { delayMs = 0, dropAnswer = false } = rule(record.method, record.path);
      const timer = setTimeout(() => {
        held.delete(timer);
        const forwarded = http.request(
          {
            host: target.hostname,
            port: target.port,
            method: record.method,
            path: record.path,
            headers: request.headers,
          },
          (answer) => {
            const body: Buffer[] = [];
            answer.on('data', (chunk: Buffer) => body.push(chunk));
            answer.on('end', () => {
              record.answeredAt = Date.now();
              record.status = answer.statusCode;
              if (dropAnswer) {
                record.dropped = true;
                request.socket.destroy();
                return;
              }
              response.writeHead(answer.statusCode ?? 502, answer.headers);
              response.end(Buffer.concat(body));
            });
          },
        );
        forwarded.on('error', () => request.socket.destroy());
        forwarded.end(Buffer.concat(chunks));
      }, delayMs);
      held.add(timer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    setRule: (next) => (rule = next),
    close: async () => {
      for (const timer of held) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** An S3 server with a proxy in front, for the tests of one file (`useS3BehindProxy`). */
export interface ProxiedS3 {
  /** The S3 server's bucket. */
  readonly bucket: string;
  readonly proxy: S3Proxy;
  /** The store's S3 access, through the proxy. */
  readonly storage: Storage;
  /** The variables that send a process's S3 calls through the proxy. */
  env(): Record<string, string>;
}

/**
 * Starts an S3 server and a proxy in front of it before the file's tests and stops them after; after each test the
 * proxy passes every request untouched again.
 */
export function useS3BehindProxy(): ProxiedS3 {
  let s3: S3Server | undefined;
  let proxy: S3Proxy | undefined;
  let storage: Storage | undefined;
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('useS3BehindProxy: used outside a test');
    return value;
  };
  beforeAll(async () => {
    s3 = await startS3Server();
    proxy = await startS3Proxy(s3.endpoint);
    storage = new Storage({ ...s3.env(), FANOUT_S3_ENDPOINT: proxy.endpoint });
  });
  afterAll(async () => {
    await proxy?.close();
    await s3?.stop();
  });
  afterEach(() => proxy?.setRule(() => ({})));
  return {
    get bucket() {
      return started(s3).bucket;
    },
    get proxy() {
      return started(proxy);
    },
    get storage() {
      return started(storage);
    },
    env: () => ({ ...started(s3).env(), FANOUT_S3_ENDPOINT: started(proxy).endpoint }),
  };
}
