import { createServer } from 'node:net';
import type { ServerCertificates } from './certificates';

/** The ports one single-process Temporal server listens on, every one on 127.0.0.1. */
export interface ClusterPorts {
  frontend: number;
  frontendHttp: number;
  frontendMembership: number;
  history: number;
  historyMembership: number;
  matching: number;
  matchingMembership: number;
  worker: number;
  workerMembership: number;
}

/** Whether nothing listens on `port` of 127.0.0.1 right now. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * Free ports below 32768. The server records its ports in the cluster_membership table, whose PostgreSQL columns are
 * smallint: an ephemeral port from the OS (32768 and up on Linux) fails start-up with "out of range for type smallint".
 */
export async function freeClusterPorts(): Promise<ClusterPorts> {
  const taken = new Set<number>();
  const next = async (): Promise<number> => {
    for (let attempt = 0; attempt < 200; attempt += 1) {
      const port = 20_000 + Math.floor(Math.random() * 12_000);
      if (!taken.has(port) && (await portIsFree(port))) {
        taken.add(port);
        return port;
      }
    }
    throw new Error('found no free port between 20000 and 32000 on 127.0.0.1');
  };
  return {
    frontend: await next(),
    frontendHttp: await next(),
    frontendMembership: await next(),
    history: await next(),
    historyMembership: await next(),
    matching: await next(),
    matchingMembership: await next(),
    worker: await next(),
    workerMembership: await next(),
  };
}

export interface ServerConfigInput {
  ports: ClusterPorts;
  postgres: { port: number; user: string };
  dynamicConfigPath: string;
  certificates?: ServerCertificates;
  /** History shards; fixed for the life of the database (the server refuses a different count later). */
  numHistoryShards: number;
}

export const DEFAULT_DATABASE = 'temporal';
export const VISIBILITY_DATABASE = 'temporal_visibility';

/**
 * The server's static configuration (what `temporal-server start` reads from `<config dir>/<env>.yaml`), as an
 * object; written out as JSON, which YAML parsers read as YAML.
 */
export function serverConfig(input: ServerConfigInput): object {
  const { ports, postgres, certificates } = input;
  const store = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `127.0.0.1:${postgres.port}`,
      connectProtocol: 'tcp',
      user: postgres.user,
      // Trust authentication: PostgreSQL ignores it, the SQL plugin wants one.
      password: 'temporal',
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const service = (grpcPort: number, membershipPort: number, httpPort?: number) => ({
    rpc: { grpcPort, membershipPort, bindOnIP: '127.0.0.1', ...(httpPort === undefined ? {} : { httpPort }) },
  });
  // The server's own system workers (namespace deletion, scanners) dial the frontend too, so with TLS on they must
  // trust the same private CA and check the same name as any outside client.
  const frontendClient = certificates
    ? { serverName: certificates.serverName, rootCaFiles: [certificates.caPath] }
    : undefined;
  const tls = certificates && {
    frontend: {
      server: { certFile: certificates.certPath, keyFile: certificates.keyPath, requireClientAuth: false },
      client: frontendClient,
    },
    systemWorker: { client: frontendClient },
  };
  return {
    log: { stdout: true, level: 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: input.numHistoryShards,
      datastores: {
        // Four services in one process each open their own pools: 4 x (10 + 4) stays well under max_connections.
        'postgres-default': store(DEFAULT_DATABASE, 10),
        'postgres-visibility': store(VISIBILITY_DATABASE, 4),
      },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
      ...(tls ? { tls } : {}),
    },
    services: {
      frontend: service(ports.frontend, ports.frontendMembership, ports.frontendHttp),
      history: service(ports.history, ports.historyMembership),
      matching: service(ports.matching, ports.matchingMembership),
      worker: service(ports.worker, ports.workerMembership),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: {
          enabled: true,
          initialFailoverVersion: 1,
          rpcName: 'frontend',
          rpcAddress: `127.0.0.1:${ports.frontend}`,
        },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: input.dynamicConfigPath, pollInterval: '10s' },
  };
}

/**
 * Dynamic config for a test and development cluster. Search attribute changes are read through on every use,
 * so FanoutName works the moment it is registered instead of after the cache's next refresh (Temporal's docs
 * say: not for production).
 */
export function dynamicConfig(): object {
  const value = (setting: unknown) => [{ value: setting, constraints: {} }];
  return {
    'system.forceSearchAttributesCacheRefreshOnRead': value(true),
    // Eager activity dispatch for fan-outs and DAGs (FANOUT_EAGER_ACTIVITIES on the workers); off in the server's defaults.
    'system.enableActivityEagerExecution': value(true),
  };
}
