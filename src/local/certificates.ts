import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** A private certificate authority and one server certificate it signed, as PEM files. */
export interface ServerCertificates {
  /** The CA certificate clients must trust (TEMPORAL_TLS_SERVER_CA_CERT_PATH). */
  readonly caPath: string;
  readonly certPath: string;
  readonly keyPath: string;
  /** The DNS name in the certificate, for clients that connect by IP and override the name they check (SNI). */
  readonly serverName: string;
}

/**
 * Generates, with openssl, a CA and a server certificate for `serverName` and 127.0.0.1, valid for a week.
 * The extensions are explicit because rustls (the worker's TLS) rejects certificates that
 * browsers let through: a CA without `CA:TRUE`, a server certificate without `serverAuth`.
 */
export function generateServerCertificates(directory: string, serverName = 'temporal.fanout.test'): ServerCertificates {
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  const file = (name: string) => path.join(directory, name);
  const openssl = (args: string[]) => {
    try {
      execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (error) {
      const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
      throw new Error(`openssl ${args[0]} failed: ${stderr || String(error)}`);
    }
  };
  const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

  openssl([
    'req',
    '-x509',
    ...ecKey,
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.pem'),
    '-days',
    '7',
    '-subj',
    '/CN=temporal-fanout test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  openssl([
    'req',
    '-new',
    ...ecKey,
    '-keyout',
    file('server.key'),
    '-out',
    file('server.csr'),
    '-subj',
    `/CN=${serverName}`,
  ]);
  writeFileSync(
    file('server.ext'),
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      `subjectAltName=DNS:${serverName},IP:127.0.0.1`,
    ].join('\n'),
  );
  openssl([
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    file('ca.pem'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-out',
    file('server.pem'),
    '-days',
    '7',
    '-extfile',
    file('server.ext'),
  ]);
  return { caPath: file('ca.pem'), certPath: file('server.pem'), keyPath: file('server.key'), serverName };
}
