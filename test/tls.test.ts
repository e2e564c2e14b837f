import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TLSConfig } from '@temporalio/client';
import { temporalConnectionFromEnvironment } from '../src/config/environment';
import { generateServerCertificates } from '../src/local/certificates';
import { startTemporalCluster, type TemporalCluster } from '../src/local/cluster';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { runCli, spawnWorker, type WorkerProcess } from './support/processes';
import { uniqueName } from './support/test-stack';

const directory = mkdtempSync(path.join(tmpdir(), 'fanout-tls-'));

function file(name: string, content: string): string {
  const target = path.join(directory, name);
  writeFileSync(target, content);
  return target;
}

function tlsObject(tls: boolean | TLSConfig | undefined): TLSConfig {
  if (typeof tls !== 'object') throw new Error(`expected TLS settings, got ${String(tls)}`);
  return tls;
}

describe('connection settings through Temporal envconfig', () => {
  // A HOME with no ~/.config/temporalio/temporal.toml, so the machine's own profile file never leaks in.
  const home = mkdtempSync(path.join(tmpdir(), 'fanout-home-'));
  const certificates = generateServerCertificates(path.join(directory, 'unit-certs'), 'temporal.example.internal');

  it('defaults to a local plaintext server and namespace default', () => {
    expect(temporalConnectionFromEnvironment({ HOME: home })).toEqual({
      address: '127.0.0.1:7233',
      namespace: 'default',
      apiKey: undefined,
      tls: undefined,
    });
  });

  it('reads the server CA and the server name (SNI) from the TEMPORAL_TLS_* variables', () => {
    const config = temporalConnectionFromEnvironment({
      HOME: home,
      TEMPORAL_ADDRESS: '10.1.2.3:7233',
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: certificates.caPath,
      TEMPORAL_TLS_SERVER_NAME: 'temporal.example.internal',
    });
    expect(config.address).toBe('10.1.2.3:7233');
    const tls = tlsObject(config.tls);
    expect(Buffer.from(tls.serverRootCACertificate ?? '').equals(readFileSync(certificates.caPath))).toBe(true);
    expect(tls.serverNameOverride).toBe('temporal.example.internal');
    expect(tls.clientCertPair).toBeUndefined();
  });

  it('takes a named profile from the TOML file in TEMPORAL_CONFIG_FILE, with variables overriding it field by field', () => {
    const toml = file(
      'temporal.toml',
      [
        '[profile.default]',
        'address = "default.example:7233"',
        '',
        '[profile.staging]',
        'address = "staging.example:7233"',
        'namespace = "fanout-staging"',
        '[profile.staging.tls]',
        `server_ca_cert_path = "${certificates.caPath}"`,
        'server_name = "temporal.example.internal"',
        '[profile.staging.grpc_meta]',
        'x-team = "agents"',
      ].join('\n'),
    );
    const staging = temporalConnectionFromEnvironment({
      HOME: home,
      TEMPORAL_CONFIG_FILE: toml,
      TEMPORAL_PROFILE: 'staging',
    });
    expect(staging).toMatchObject({
      address: 'staging.example:7233',
      namespace: 'fanout-staging',
      metadata: { 'x-team': 'agents' },
    });
    expect(tlsObject(staging.tls).serverNameOverride).toBe('temporal.example.internal');

    const overridden = temporalConnectionFromEnvironment({
      HOME: home,
      TEMPORAL_CONFIG_FILE: toml,
      TEMPORAL_PROFILE: 'staging',
      TEMPORAL_NAMESPACE: 'other',
      TEMPORAL_TLS_SERVER_NAME: 'other.example.internal',
    });
    expect(overridden).toMatchObject({ address: 'staging.example:7233', namespace: 'other' });
    expect(tlsObject(overridden.tls).serverNameOverride).toBe('other.example.internal');

    expect(temporalConnectionFromEnvironment({ HOME: home, TEMPORAL_CONFIG_FILE: toml }).address).toBe(
      'default.example:7233',
    );
  });

  it('names a profile that does not exist', () => {
    const toml = file('only-default.toml', '[profile.default]\naddress = "a:1"\n');
    expect(() =>
      temporalConnectionFromEnvironment({ HOME: home, TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'prod' }),
    ).toThrow(/Temporal connection settings.*Profile 'prod' not found/);
  });

  it('still honours TEMPORAL_TLS_CERT_PATH / TEMPORAL_TLS_KEY_PATH and refuses one without the other', () => {
    const mtls = temporalConnectionFromEnvironment({
      HOME: home,
      TEMPORAL_TLS_CERT_PATH: certificates.certPath,
      TEMPORAL_TLS_KEY_PATH: certificates.keyPath,
    });
    const pair = tlsObject(mtls.tls).clientCertPair;
    expect(pair && Buffer.from(pair.crt).equals(readFileSync(certificates.certPath))).toBe(true);
    expect(() =>
      temporalConnectionFromEnvironment({ HOME: home, TEMPORAL_TLS_CERT_PATH: certificates.certPath }),
    ).toThrow(/TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH/);
  });

  it('treats TEMPORAL_TLS=true alone as TLS with the system CAs, and blank variables as unset', () => {
    expect(
      temporalConnectionFromEnvironment({
        HOME: home,
        TEMPORAL_TLS: 'true',
        TEMPORAL_ADDRESS: ' ',
        TEMPORAL_TLS_SERVER_NAME: '',
      }),
    ).toMatchObject({
      address: '127.0.0.1:7233',
      tls: true,
    });
    expect(temporalConnectionFromEnvironment({ HOME: home, TEMPORAL_API_KEY: 'key' })).toMatchObject({
      apiKey: 'key',
      tls: true,
    });
  });
});

describe('a worker and the CLI on a Temporal cluster with a private CA', () => {
  let cluster: TemporalCluster | undefined;
  let simulator: Simulator;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    const started = Date.now();
    cluster = await startTemporalCluster({ tls: true });
    process.stderr.write(`TLS cluster ready at ${cluster.address} in ${Date.now() - started} ms\n`);
    simulator = await startSimulator();
  }, 180_000);

  afterEach(async () => {
    for (const worker of workers.splice(0)) await worker.stop();
  });

  afterAll(async () => {
    await simulator?.close();
    await cluster?.stop();
  });

  function running(): TemporalCluster & { tls: NonNullable<TemporalCluster['tls']> } {
    if (!cluster?.tls) throw new Error('the TLS cluster did not start');
    return { ...cluster, tls: cluster.tls };
  }

  /** Only the envconfig variables: no profile file (HOME without one), nothing else that could carry TLS settings. */
  function trusting(extra: Record<string, string> = {}): Record<string, string> {
    const { tls } = running();
    return {
      HOME: directory,
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: tls.caPath,
      TEMPORAL_TLS_SERVER_NAME: tls.serverName,
      OPENAI_BASE_URL: simulator.baseUrl,
      OPENAI_API_KEY: 'test-key',
      ...extra,
    };
  }

  it('runs a fan-out end to end when worker and CLI trust the cluster CA and check its name', async () => {
    const taskQueue = uniqueName('tls');
    workers.push(await spawnWorker({ address: running().address, taskQueue, env: trusting() }));
    const tasks = file(
      'tls-tasks.jsonl',
      '{"id":"a","prompt":"one"}\n{"id":"b","prompt":"two"}\n{"id":"c","prompt":"three"}\n',
    );

    const { code, stdout, stderr } = await runCli(
      ['run', tasks, '--json', '--address', running().address, '--task-queue', taskQueue],
      trusting(),
    );

    expect({ code, stderr }).toMatchObject({ code: 0 });
    const result = JSON.parse(stdout) as { results: { id: string; status: string }[] };
    expect(result.results.map(({ id, status }) => [id, status])).toEqual([
      ['a', 'ok'],
      ['b', 'ok'],
      ['c', 'ok'],
    ]);
  });

  it('reaches the cluster through a named profile in a TOML file', async () => {
    const taskQueue = uniqueName('tls-profile');
    workers.push(await spawnWorker({ address: running().address, taskQueue, env: trusting() }));
    const { tls, address } = running();
    const toml = file(
      'cluster.toml',
      `[profile.cluster]\naddress = "${address}"\n[profile.cluster.tls]\nserver_ca_cert_path = "${tls.caPath}"\nserver_name = "${tls.serverName}"\n`,
    );
    const tasks = file('profile-tasks.jsonl', '{"id":"p","prompt":"via profile"}\n');

    const { code, stderr } = await runCli(['run', tasks, '--task-queue', taskQueue], {
      HOME: directory,
      TEMPORAL_CONFIG_FILE: toml,
      TEMPORAL_PROFILE: 'cluster',
    });

    expect({ code, stderr }).toMatchObject({ code: 0 });
  });

  it('fails with an error that names the CA setting when the CA is not given, for the worker and the CLI', async () => {
    const tasks = file('untrusted.jsonl', '{"id":"u","prompt":"x"}\n');
    const withoutCa = { HOME: directory, TEMPORAL_TLS: 'true', TEMPORAL_TLS_SERVER_NAME: running().tls.serverName };
    const address = ['--address', running().address, '--task-queue', uniqueName('untrusted')];

    const [worker, run] = await Promise.all([
      runCli(['worker', ...address], withoutCa),
      runCli(['run', tasks, ...address], withoutCa),
    ]);

    for (const outcome of [worker, run]) {
      expect(outcome.code).toBe(3);
      expect(outcome.stderr).toContain(
        `cannot connect to Temporal at ${running().address}: the server's certificate is not signed by a CA this client trusts`,
      );
      expect(outcome.stderr).toContain('TEMPORAL_TLS_SERVER_CA_CERT_PATH');
    }
  });

  it('fails naming the server name setting when the name does not match the certificate, and asks for TLS when it is off', async () => {
    const tasks = file('mismatch.jsonl', '{"id":"m","prompt":"x"}\n');
    const address = ['--address', running().address, '--task-queue', uniqueName('mismatch')];

    const [wrongName, plaintext] = await Promise.all([
      runCli(['run', tasks, ...address], trusting({ TEMPORAL_TLS_SERVER_NAME: 'wrong.example' })),
      runCli(['run', tasks, ...address], { HOME: directory }),
    ]);

    expect(wrongName.code).toBe(3);
    expect(wrongName.stderr).toContain(`the server's certificate is not for "wrong.example"`);
    expect(wrongName.stderr).toContain('TEMPORAL_TLS_SERVER_NAME');
    expect(plaintext.code).toBe(3);
    expect(plaintext.stderr).toContain('the server expects TLS; set TEMPORAL_TLS=true');
  });
});
