import type { TLSConfig } from '@temporalio/client';
import type { LogLevel } from '@temporalio/common';
import { loadClientConfigProfile, toClientOptions, type ClientConfigProfile } from '@temporalio/envconfig';

/**
 * How to reach Temporal, shared by the worker and the client. Read by Temporal's own environment configuration
 * (`@temporalio/envconfig`), so the same profile file and TEMPORAL_* variables work here, in the Temporal CLI and in
 * other SDKs: a profile from TEMPORAL_CONFIG_FILE (default ~/.config/temporalio/temporal.toml) named by
 * TEMPORAL_PROFILE (default "default"), with environment variables overriding it field by field.
 */
export interface TemporalConnectionConfig {
  /** host:port of the Temporal frontend. Env TEMPORAL_ADDRESS, profile `address`; default 127.0.0.1:7233. */
  address: string;
  /** Env TEMPORAL_NAMESPACE, profile `namespace`; default "default". */
  namespace: string;
  /** Env TEMPORAL_API_KEY, profile `api_key` (Temporal Cloud); implies TLS. */
  apiKey?: string;
  /**
   * TLS: `true` trusts the system's CAs. An object adds a private CA (env TEMPORAL_TLS_SERVER_CA_CERT_PATH or _DATA,
   * profile `tls.server_ca_cert_path`), the name to check the certificate against when it differs from the address
   * (SNI; TEMPORAL_TLS_SERVER_NAME, `tls.server_name`) and a client certificate for mTLS
   * (TEMPORAL_TLS_CLIENT_CERT_PATH / TEMPORAL_TLS_CLIENT_KEY_PATH). TEMPORAL_TLS=true turns it on, =false off.
   */
  tls?: boolean | TLSConfig;
  /** gRPC headers sent with every call: env TEMPORAL_GRPC_META_<NAME>, profile `grpc_meta`. */
  metadata?: Record<string, string>;
}

export const DEFAULT_TASK_QUEUE = 'fanout';

/** The variables a `xFromEnvironment` function reads: `process.env` by default, any record in tests. */
export type Environment = Record<string, string | undefined>;

/** The SDK's log level: FANOUT_LOG_LEVEL (any case), else `fallback`. */
export function logLevelFromEnvironment(fallback: LogLevel, environment: Environment = process.env): LogLevel {
  return (environment.FANOUT_LOG_LEVEL ?? fallback).toUpperCase() as LogLevel;
}

/** Reads an optional positive integer variable, failing with a message that names it. */
export function integerFromEnvironment(name: string, environment: Environment = process.env): number | undefined {
  return wholeNumberFromEnvironment(name, environment, 1, 'a positive whole number');
}

/** Reads an optional whole number variable that may be 0, failing with a message that names it. */
export function countFromEnvironment(name: string, environment: Environment = process.env): number | undefined {
  return wholeNumberFromEnvironment(name, environment, 0, 'a whole number (0 or more)');
}

function wholeNumberFromEnvironment(
  name: string,
  environment: Environment,
  minimum: number,
  wanted: string,
): number | undefined {
  const raw = environment[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < minimum) throw new Error(`${name} must be ${wanted}, got "${raw}"`);
  return value;
}

/** Reads an optional positive number variable (fractions allowed), failing with a message that names it. */
export function numberFromEnvironment(name: string, environment: Environment = process.env): number | undefined {
  const raw = environment[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return value;
}

export function taskQueueFromEnvironment(environment: Environment = process.env): string {
  return environment.FANOUT_TASK_QUEUE?.trim() || DEFAULT_TASK_QUEUE;
}

/** Names this project read before it used envconfig, still honoured when the envconfig name is not set. */
const LEGACY_VARIABLES: Record<string, string> = {
  TEMPORAL_TLS_CERT_PATH: 'TEMPORAL_TLS_CLIENT_CERT_PATH',
  TEMPORAL_TLS_KEY_PATH: 'TEMPORAL_TLS_CLIENT_KEY_PATH',
};

/**
 * The variables as envconfig should see them: set-but-blank counts as unset (as it always has here, and as a
 * `FOO= cmd` in a shell means), values are trimmed, and the legacy names map to envconfig's. Blank
 * TEMPORAL_GRPC_META_* stay: for envconfig a blank one removes that header from the profile.
 */
function envconfigVariables(environment: Environment): Record<string, string> {
  const variables: Record<string, string> = {};
  for (const [name, raw] of Object.entries(environment)) {
    if (raw === undefined) continue;
    const value = raw.trim();
    if (value === '' && !name.startsWith('TEMPORAL_GRPC_META_')) continue;
    variables[name] = value;
  }
  for (const [legacy, current] of Object.entries(LEGACY_VARIABLES)) {
    if (variables[legacy] !== undefined && variables[current] === undefined) variables[current] = variables[legacy];
  }
  return variables;
}

/** An mTLS certificate without its key (or the reverse) would silently connect without client authentication. */
function checkClientCertificatePair(profile: ClientConfigProfile): void {
  const tls = profile.tls;
  if (!tls || tls.disabled === true) return;
  if (Boolean(tls.clientCert) !== Boolean(tls.clientKey)) {
    throw new Error(
      'a TLS client certificate and its key must be set together: TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH ' +
        '(or TEMPORAL_TLS_CERT_PATH / TEMPORAL_TLS_KEY_PATH, or client_cert_path / client_key_path in the profile)',
    );
  }
}

/** TLS as the connection wants it: `true` rather than an object with nothing in it (system CAs, the address's name). */
function simplifyTls(tls: TLSConfig | boolean | undefined): TLSConfig | boolean | undefined {
  if (typeof tls !== 'object') return tls;
  const set = Object.fromEntries(Object.entries(tls).filter(([, value]) => value !== undefined)) as TLSConfig;
  return Object.keys(set).length === 0 ? true : set;
}

/**
 * Connection settings from the environment and the active envconfig profile, with this project's defaults.
 * Throws naming the problem when the profile cannot be read, a named profile does not exist, a CA or certificate
 * file is missing, or a client certificate lacks its key.
 *
 * @example
 * // TEMPORAL_ADDRESS=10.0.0.5:7233 TEMPORAL_TLS_SERVER_CA_CERT_PATH=/etc/temporal/ca.pem TEMPORAL_TLS_SERVER_NAME=temporal.internal
 * const { address, tls } = temporalConnectionFromEnvironment();
 */
export function temporalConnectionFromEnvironment(environment: Environment = process.env): TemporalConnectionConfig {
  let profile: ClientConfigProfile;
  let connection: ReturnType<typeof toClientOptions>;
  try {
    profile = loadClientConfigProfile({ overrideEnvVars: envconfigVariables(environment) });
    checkClientCertificatePair(profile);
    connection = toClientOptions(profile);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new Error(`cannot read the Temporal connection settings (TEMPORAL_* variables, profile file): ${message}`);
  }
  const metadata = profile.grpcMeta;
  return {
    address: profile.address || '127.0.0.1:7233',
    namespace: profile.namespace || 'default',
    apiKey: profile.apiKey || undefined,
    tls: simplifyTls(connection.connectionOptions.tls ?? undefined),
    ...(metadata && Object.keys(metadata).length > 0 ? { metadata } : {}),
  };
}

/** gRPC compression of a worker's connection to Temporal: the SDK's `grpcCompression` codec. */
export type GrpcCompression = 'gzip' | 'none';

/** Whether `address` (host:port, a bracketed IPv6 host allowed) names this machine. */
export function isLoopbackAddress(address: string): boolean {
  const host = (address.startsWith('[') ? address.slice(1, address.indexOf(']')) : address.replace(/:\d+$/, ''))
    .trim()
    .toLowerCase();
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * The gRPC compression of a worker's connection to `address`: FANOUT_GRPC_COMPRESSION (`gzip` or `none`), by default
 * none to a server on this machine and gzip (the SDK's own default) to any other. Every poll and completion is
 * compressed and decompressed in the worker's Rust threads; with the allocator settings of `fanout worker`
 * (src/cli/heap-cap.ts) each message's zlib buffers are mapped, faulted in and unmapped again, so 200 agents spent about
 * 1.6 s of worker CPU in it, a tenth of the run (docs/BENCHMARKS.md, "Agents' worker CPU"), to save bytes on a loopback.
 */
export function grpcCompressionFromEnvironment(
  address: string,
  environment: Environment = process.env,
): GrpcCompression {
  const raw = environment.FANOUT_GRPC_COMPRESSION?.trim().toLowerCase();
  if (raw === undefined || raw === '') return isLoopbackAddress(address) ? 'none' : 'gzip';
  if (raw === 'gzip' || raw === 'none') return raw;
  throw new Error(`FANOUT_GRPC_COMPRESSION must be "gzip" or "none", got "${environment.FANOUT_GRPC_COMPRESSION}"`);
}

/** The address of the Temporal Web UI for links, if known. Env TEMPORAL_UI_URL; default for a local dev server. */
export function temporalUiUrl(namespace: string, workflowId: string, environment: Environment = process.env): string {
  const base = (environment.TEMPORAL_UI_URL?.trim() || 'http://127.0.0.1:8233').replace(/\/$/, '');
  return `${base}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}
