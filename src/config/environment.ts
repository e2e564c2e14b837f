import { readFileSync } from 'node:fs';

/** How to reach Temporal, shared by the worker and the client. */
export interface TemporalConnectionConfig {
  /** host:port of the Temporal frontend. Env TEMPORAL_ADDRESS; default 127.0.0.1:7233. */
  address: string;
  /** Env TEMPORAL_NAMESPACE; default "default". */
  namespace: string;
  /** Env TEMPORAL_API_KEY (Temporal Cloud); implies TLS. */
  apiKey?: string;
  /** TLS settings: env TEMPORAL_TLS=true, or mTLS from TEMPORAL_TLS_CERT_PATH / TEMPORAL_TLS_KEY_PATH. */
  tls?: boolean | { clientCertPair: { crt: Buffer; key: Buffer } };
}

export const DEFAULT_TASK_QUEUE = 'fanout';

type Environment = Record<string, string | undefined>;

/** Reads an optional positive integer variable, failing with a message that names it. */
export function integerFromEnvironment(name: string, environment: Environment = process.env): number | undefined {
  const raw = environment[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`${name} must be a positive whole number, got "${raw}"`);
  }
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

export function temporalConnectionFromEnvironment(environment: Environment = process.env): TemporalConnectionConfig {
  const apiKey = environment.TEMPORAL_API_KEY?.trim() || undefined;
  const certPath = environment.TEMPORAL_TLS_CERT_PATH?.trim();
  const keyPath = environment.TEMPORAL_TLS_KEY_PATH?.trim();
  if (Boolean(certPath) !== Boolean(keyPath)) {
    throw new Error('TEMPORAL_TLS_CERT_PATH and TEMPORAL_TLS_KEY_PATH must be set together');
  }
  let tls: TemporalConnectionConfig['tls'];
  if (certPath && keyPath) tls = { clientCertPair: { crt: readFileSync(certPath), key: readFileSync(keyPath) } };
  else if (apiKey || environment.TEMPORAL_TLS === 'true') tls = true;
  return {
    address: environment.TEMPORAL_ADDRESS?.trim() || '127.0.0.1:7233',
    namespace: environment.TEMPORAL_NAMESPACE?.trim() || 'default',
    apiKey,
    tls,
  };
}

/** The address of the Temporal Web UI for links, if known. Env TEMPORAL_UI_URL; default for a local dev server. */
export function temporalUiUrl(namespace: string, workflowId: string, environment: Environment = process.env): string {
  const base = (environment.TEMPORAL_UI_URL?.trim() || 'http://127.0.0.1:8233').replace(/\/$/, '');
  return `${base}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}
