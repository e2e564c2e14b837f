import http from 'node:http';
import type { AddressInfo } from 'node:net';

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
