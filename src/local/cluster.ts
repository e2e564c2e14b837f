import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { TLSConfig } from '@temporalio/client';
import { FANOUT_NAME } from '../contract/search-attributes';
import { generateServerCertificates, type ServerCertificates } from './certificates';
import { ensureTool } from './ensure-tool';
import { waitFor } from './wait-for';
import { DEFAULT_DATABASE, dynamicConfig, freeClusterPorts, serverConfig, VISIBILITY_DATABASE } from './cluster-config';
import { startPostgres, type PostgresServer } from './postgres';
import { startServerProcess, waitUntilServing, type ServerProcess } from './server-process';
import { findTemporalCli } from './temporal-cli';

const run = promisify(execFile);

export interface TemporalClusterOptions {
  /**
   * Serve the frontend over TLS with a private CA generated at every start (paths in `tls` of the result; they stay
   * the same for a kept `dataDir`). Default false.
   */
  tls?: boolean;
  /**
   * Where PostgreSQL's data, the server config and the logs live. An existing one is reused (same namespace,
   * same workflows). Default: a temporary directory, removed by `stop()`.
   */
  dataDir?: string;
}

/** A Temporal server on PostgreSQL, as a production cluster is run, on 127.0.0.1. */
export interface TemporalCluster {
  /** host:port of the frontend. */
  readonly address: string;
  readonly namespace: string;
  /** This cluster has no Web UI. */
  readonly uiUrl?: undefined;
  readonly postgres: { readonly port: number; stop(): Promise<void> };
  /** Set when started with `tls: true`: the CA clients must trust and the name the certificate is for. */
  readonly tls?: ServerCertificates;
  /** Holds the data, the config and `temporal-server.log`. */
  readonly directory: string;
  /** Stops the temporal-server process gracefully (SIGTERM); PostgreSQL keeps running. */
  stopServer(): Promise<void>;
  /** SIGKILLs the temporal-server process: no shutdown at all, as in a crash. */
  killServer(): Promise<void>;
  /** Starts the temporal-server process again on the same ports and database; resolves when it serves. */
  startServer(): Promise<void>;
  /** Stops everything and removes the temporary directory (not a `dataDir` you passed). */
  stop(): Promise<void>;
}

/** Where temporal-server, temporal-sql-tool and the PostgreSQL schema are, building them once if needed. */
export function findTemporalServer(): string {
  return ensureTool(
    'ensure-temporal-server.sh',
    'no Temporal server is available (see the messages above); set TEMPORAL_SERVER_HOME to one',
  );
}

const NAMESPACE = 'default';
const HISTORY_SHARDS = 4;

/**
 * Starts PostgreSQL and a Temporal server on it (frontend, history, matching and worker services in one process),
 * with the schema set up, namespace `default` created and the FanoutName search attribute registered.
 *
 * @example
 * const cluster = await startTemporalCluster();
 * const fanout = await FanoutClient.connect({ temporal: { address: cluster.address } });
 * // ...
 * await cluster.stop();
 */
export async function startTemporalCluster(options: TemporalClusterOptions = {}): Promise<TemporalCluster> {
  const install = findTemporalServer();
  const temporary = options.dataDir === undefined;
  const directory = options.dataDir ?? mkdtempSync(path.join(tmpdir(), 'fanout-cluster-'));
  mkdirSync(directory, { recursive: true });
  // PostgreSQL runs as its own account when we are root, and must reach its directory inside this one.
  chmodSync(directory, 0o755);

  let postgres: PostgresServer | undefined;
  let server: ServerProcess | undefined;
  const cleanUp = () => {
    server?.child.kill('SIGKILL');
  };
  process.once('exit', cleanUp);
  try {
    postgres = await startPostgres({ directory: path.join(directory, 'postgres') });
    await setUpSchema(install, postgres);

    const certificates = options.tls ? generateServerCertificates(path.join(directory, 'tls')) : undefined;
    const ports = await freeClusterPorts();
    const configDirectory = path.join(directory, 'config');
    mkdirSync(configDirectory, { recursive: true });
    const dynamicConfigPath = path.join(directory, 'dynamic-config.yaml');
    writeFileSync(dynamicConfigPath, JSON.stringify(dynamicConfig(), null, 2));
    writeFileSync(
      path.join(configDirectory, 'cluster.yaml'),
      JSON.stringify(
        serverConfig({ ports, postgres, dynamicConfigPath, certificates, numHistoryShards: HISTORY_SHARDS }),
        null,
        2,
      ),
    );

    const address = `127.0.0.1:${ports.frontend}`;
    const tlsConfig: TLSConfig | undefined = certificates && {
      serverRootCACertificate: readFileSync(certificates.caPath),
      serverNameOverride: certificates.serverName,
    };
    const launch = async () => {
      server = startServerProcess(install, directory);
      await waitUntilServing(server, ports, address, tlsConfig);
    };
    await launch();
    await prepareNamespace(address, certificates);

    const stopServer = async (signal: 'SIGTERM' | 'SIGKILL') => {
      if (server) await server.stop(signal);
    };
    const runningPostgres = postgres;
    return {
      address,
      namespace: NAMESPACE,
      postgres: { port: postgres.port, stop: () => runningPostgres.stop() },
      tls: certificates,
      directory,
      stopServer: () => stopServer('SIGTERM'),
      killServer: () => stopServer('SIGKILL'),
      startServer: async () => {
        if (server && !server.exited()) throw new Error('the Temporal server is already running; stop it first');
        await launch();
      },
      stop: async () => {
        await stopServer('SIGTERM');
        await runningPostgres.stop();
        process.removeListener('exit', cleanUp);
        if (temporary) rmSync(directory, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await server?.stop('SIGKILL');
    await postgres?.stop();
    process.removeListener('exit', cleanUp);
    throw error;
  }
}

/** Creates the two databases on a fresh PostgreSQL and brings both schemas to the version this server needs. */
async function setUpSchema(install: string, postgres: PostgresServer): Promise<void> {
  const tool = path.join(install, 'temporal-sql-tool');
  const connection = [
    '--plugin',
    'postgres12',
    '--endpoint',
    '127.0.0.1',
    '--port',
    String(postgres.port),
    '--user',
    postgres.user,
    '--password',
    'temporal',
  ];
  const sql = async (database: string, ...command: string[]) => {
    try {
      await run(tool, [...connection, '--database', database, ...command]);
    } catch (error) {
      const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
      throw new Error(
        `temporal-sql-tool ${command[0]} on ${database} failed: ${(stderr || stdout).trim().slice(-2000)}`,
      );
    }
  };
  const schemas: [string, string][] = [
    [DEFAULT_DATABASE, 'temporal'],
    [VISIBILITY_DATABASE, 'visibility'],
  ];
  for (const [database, schema] of schemas) {
    if (postgres.fresh) {
      await sql(database, 'create-database', '--defaultdb', 'postgres');
      await sql(database, 'setup-schema', '--version', '0.0');
    }
    // A no-op when the schema is current; upgrades a kept dataDir made by an older server.
    await sql(
      database,
      'update-schema',
      '--schema-dir',
      path.join(install, 'schema', 'postgresql', 'v12', schema, 'versioned'),
    );
  }
}

/**
 * Creates namespace `default` and the FanoutName search attribute with the Temporal CLI, as an operator would,
 * and waits until a visibility query on FanoutName succeeds: then runs can start with it and be listed by it.
 * Both steps are skipped when a kept data directory already has them.
 */
async function prepareNamespace(address: string, certificates: ServerCertificates | undefined): Promise<void> {
  const cli = findTemporalCli();
  const connectionFlags = [
    '--address',
    address,
    '--namespace',
    NAMESPACE,
    '--disable-config-file',
    '--disable-config-env',
    ...(certificates ? ['--tls-ca-path', certificates.caPath, '--tls-server-name', certificates.serverName] : []),
  ];
  // Variables like TEMPORAL_ADDRESS in our environment are for our clients, not for this set-up.
  const environment = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('TEMPORAL_')));
  const temporal = async (...args: string[]) => {
    try {
      return (await run(cli, [...args, ...connectionFlags], { env: environment })).stdout;
    } catch (error) {
      const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
      throw new Error(`temporal ${args.join(' ')}: ${(stderr || stdout).trim()}`);
    }
  };

  await waitFor(
    `namespace ${NAMESPACE} to exist`,
    async () => {
      try {
        await temporal('operator', 'namespace', 'describe');
        return true;
      } catch {
        await temporal('operator', 'namespace', 'create', '--retention', '72h');
        return false;
      }
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );

  await waitFor(
    `search attribute ${FANOUT_NAME.name} to be usable`,
    async () => {
      const listed = await temporal('operator', 'search-attribute', 'list', '--output', 'json');
      if (!listed.includes(`"${FANOUT_NAME.name}"`)) {
        await temporal('operator', 'search-attribute', 'create', '--name', FANOUT_NAME.name, '--type', 'Keyword');
        return false;
      }
      await temporal('workflow', 'count', '--query', `${FANOUT_NAME.name} = 'probe'`);
      return true;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
}
