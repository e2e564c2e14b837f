import { isIP, Socket } from 'node:net';
import { connect as connectTls, type ConnectionOptions } from 'node:tls';
import type { TemporalConnectionConfig } from './environment';

const PROBE_TIMEOUT_MS = 5_000;

/** Why a TLS handshake failed, in terms of the settings that fix it. */
function explainTlsError(error: NodeJS.ErrnoException & { reason?: string }, serverName: string | undefined): string {
  switch (error.code) {
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
      return (
        "the server's certificate is not signed by a CA this client trusts; if the cluster uses a private CA, point " +
        'TEMPORAL_TLS_SERVER_CA_CERT_PATH (or tls.server_ca_cert_path in the profile) at its CA certificate'
      );
    case 'ERR_TLS_CERT_ALTNAME_INVALID':
      return (
        `the server's certificate is not for "${serverName}" (${error.reason ?? error.message}); set TEMPORAL_TLS_SERVER_NAME ` +
        '(or tls.server_name in the profile) to a name the certificate has'
      );
    case 'CERT_HAS_EXPIRED':
      return "the server's certificate has expired";
    default:
      return `the TLS handshake failed: ${error.message}`;
  }
}

type TlsProbe =
  { kind: 'handshake' } | { kind: 'plaintext server' } | { kind: 'no answer' } | { kind: 'failed'; reason: string };

const PLAINTEXT_SERVER = 'the server does not speak TLS; unset TEMPORAL_TLS and the other TEMPORAL_TLS_* settings';

/** Opens a TLS connection the way the SDK would (HTTP/2 ALPN, the same CA, name and client certificate). */
function probeTls(host: string, port: number, config: TemporalConnectionConfig): Promise<TlsProbe> {
  const tls = typeof config.tls === 'object' ? config.tls : {};
  const serverName = tls.serverNameOverride ?? (isIP(host) ? undefined : host);
  const options: ConnectionOptions = {
    host,
    port,
    // gRPC servers (Go's since grpc-go 1.67) refuse a handshake that does not offer h2.
    ALPNProtocols: ['h2'],
    ...(serverName === undefined ? {} : { servername: serverName }),
    ...(tls.serverRootCACertificate ? { ca: Buffer.from(tls.serverRootCACertificate) } : {}),
    ...(tls.clientCertPair
      ? { cert: Buffer.from(tls.clientCertPair.crt), key: Buffer.from(tls.clientCertPair.key) }
      : {}),
  };
  return new Promise((resolve) => {
    const socket = connectTls(options);
    const done = (probe: TlsProbe) => {
      socket.destroy();
      resolve(probe);
    };
    socket.setTimeout(PROBE_TIMEOUT_MS, () => done({ kind: 'no answer' }));
    socket.once('secureConnect', () => done({ kind: 'handshake' }));
    socket.once('error', (error: NodeJS.ErrnoException & { reason?: string }) => {
      // A plaintext HTTP/2 server reads the ClientHello as a broken preface and hangs up, or answers in clear text.
      if (error.code === 'ECONNRESET' || /wrong version number|packet length too long/i.test(error.message)) {
        done({ kind: 'plaintext server' });
      } else done({ kind: 'failed', reason: explainTlsError(error, serverName ?? host) });
    });
  });
}

/** Whether something accepts TCP connections there; resolves to what went wrong, or undefined. */
function probeTcp(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (problem: string | undefined) => {
      socket.destroy();
      resolve(problem);
    };
    socket.setTimeout(PROBE_TIMEOUT_MS, () => done(`no answer within ${PROBE_TIMEOUT_MS} ms`));
    socket.once('connect', () => done(undefined));
    socket.once('error', (error: NodeJS.ErrnoException) =>
      done(error.code === 'ECONNREFUSED' ? 'nothing is listening there' : error.message),
    );
    socket.connect(port, host);
  });
}

function hostAndPort(address: string): { host: string; port: number } | undefined {
  const match = /^\[?([^\]]+?)\]?:(\d+)$/.exec(address.trim());
  return match ? { host: match[1], port: Number(match[2]) } : undefined;
}

/** What the probes found wrong, or undefined when they found nothing. */
async function diagnose(config: TemporalConnectionConfig, host: string, port: number): Promise<string | undefined> {
  const unreachable = await probeTcp(host, port);
  if (unreachable) return unreachable;
  const useTls = Boolean(config.tls) || config.apiKey !== undefined;
  const probe = await probeTls(host, port, useTls ? config : { ...config, tls: true });
  if (useTls) {
    if (probe.kind === 'plaintext server') return PLAINTEXT_SERVER;
    if (probe.kind === 'no answer') return `the TLS handshake did not finish within ${PROBE_TIMEOUT_MS} ms`;
    return probe.kind === 'failed' ? probe.reason : undefined;
  }
  // A handshake, even one our trust store rejects, means the server wants TLS.
  if (probe.kind === 'handshake' || probe.kind === 'failed') {
    return 'the server expects TLS; set TEMPORAL_TLS=true, and TEMPORAL_TLS_SERVER_CA_CERT_PATH if its CA is private';
  }
  return undefined;
}

/**
 * Turns a failed connect into an error that says what to change. The SDK's own messages are a grpc-js
 * "Failed to connect before the deadline" after 10 s, or a Rust transport error; neither says a CA is missing.
 * This probes the address with a TCP connection and a TLS handshake made with the same settings and reports
 * what those found. When the probes find nothing wrong, the SDK's message is kept.
 */
export async function explainConnectionFailure(error: unknown, config: TemporalConnectionConfig): Promise<Error> {
  const original = error instanceof Error ? error.message.split('\n')[0] : String(error);
  const target = hostAndPort(config.address);
  const reason = target ? await diagnose(config, target.host, target.port) : 'the address must be host:port';
  return new Error(`cannot connect to Temporal at ${config.address}: ${reason ?? original}`, { cause: error });
}
