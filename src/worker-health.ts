import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Worker } from '@temporalio/worker';

/** A running health endpoint. */
export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

export interface HealthServerOptions {
  /** 0 picks a free port. */
  port: number;
  /** Default 0.0.0.0: probes (a kubelet, a load balancer) come from outside the process's host. */
  host?: string;
}

/**
 * Serves `GET /healthz` for container HEALTHCHECKs and liveness/readiness probes: 200 while the worker polls
 * (state RUNNING), 503 while it starts, drains for shutdown or has stopped; the body is `{"state":"…"}`.
 * Kept to this one route; metrics belong elsewhere.
 */
export function startHealthServer(
  worker: Pick<Worker, 'getState'>,
  options: HealthServerOptions,
): Promise<HealthServer> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (path !== '/healthz' || (request.method !== 'GET' && request.method !== 'HEAD')) {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /healthz is served here\n');
      return;
    }
    const state = worker.getState();
    response.writeHead(state === 'RUNNING' ? 200 : 503, { 'content-type': 'application/json' });
    response.end(request.method === 'HEAD' ? undefined : `${JSON.stringify({ state })}\n`);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve({
        port: (server.address() as AddressInfo).port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}
