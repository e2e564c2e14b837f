import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { providerFromEnvironment } from '../src/llm/llm-client';
import { FanoutClient } from '../src/client/fanout-client';
import { findTemporalServer } from '../src/local/cluster';
import { startDevServer, type DevServer } from '../src/local/dev-server';
import { freePort } from '../src/local/free-port';
import { findPostgresBinaries, startPostgres } from '../src/local/postgres';
import { findTemporalCli } from '../src/local/temporal-cli';
import { startSimulator, type Simulator } from '../src/sim/simulator';
import { ROOT } from './support/paths';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

// No Docker engine runs here. `docker-compose config` resolves and validates the file; the one-shot services' scripts
// then run for real against a local PostgreSQL and Temporal server with the same tools their images carry
// (temporal-sql-tool and the schema of server 1.29.1, the Temporal CLI), and the worker service's command runs with
// its compose environment and the image's settings, checked by the image's HEALTHCHECK command.

const run = promisify(execFile);

interface ComposeService {
  image?: string;
  build?: unknown;
  command?: string[];
  entrypoint?: string[];
  working_dir?: string;
  restart?: string;
  stop_grace_period?: string;
  depends_on?: Record<string, { condition: string }>;
  ports?: { published: number | string; target: number | string }[];
  environment?: Record<string, string>;
  volumes?: string[];
  healthcheck?: { test: string[] };
}

/** The compose file as `docker-compose config` resolves it (no Docker engine needed), with `env` set. */
function resolvedCompose(env: Record<string, string> = {}): Record<string, ComposeService> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(
      ([key]) => !key.startsWith('OPENAI_') && !key.startsWith('FANOUT_') && !key.startsWith('TEMPORAL_'),
    ),
  );
  const yaml = execFileSync('docker-compose', ['-f', path.join(ROOT, 'docker-compose.yml'), 'config'], {
    encoding: 'utf8',
    env: { ...clean, ...env },
  });
  return (parse(yaml) as { services: Record<string, ComposeService> }).services;
}

/** A one-shot service's shell script as its container runs it (`config` output keeps compose's `$$` escapes). */
function scriptOf(service: ComposeService): string[] {
  expect(service.entrypoint).toEqual(['/bin/sh', '-ec']);
  return ['-ec', (service.command ?? []).join(' ').replace(/\$\$/g, '$')];
}

/** The Dockerfile's final stage: its ENV settings and its HEALTHCHECK command. */
function imageSettings(): { env: Record<string, string>; healthcheck: string[] } {
  const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8').replace(/\\\n\s*/g, ' ');
  const finalStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  const env: Record<string, string> = {};
  for (const line of finalStage.split('\n').filter((candidate) => candidate.startsWith('ENV '))) {
    for (const [, key, value] of line.slice(4).matchAll(/(\w+)=(\S+)/g)) env[key] = value;
  }
  const healthcheck = /^HEALTHCHECK .*?CMD (\[.*\])$/m.exec(finalStage)?.[1];
  if (!healthcheck) throw new Error('the Dockerfile has no HEALTHCHECK CMD in its final stage');
  return { env, healthcheck: JSON.parse(healthcheck) as string[] };
}

const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const LONG_RUNNING = ['postgresql', 'simulator', 'temporal', 'temporal-ui', 'worker'];
const ONE_SHOT = ['temporal-create-namespace', 'temporal-schema'];

describe('docker-compose.yml', () => {
  const services = resolvedCompose();

  it('is valid and holds Temporal on PostgreSQL with its setup one-shots, its UI, the worker and the simulator', () => {
    expect(Object.keys(services).sort()).toEqual([...LONG_RUNNING, ...ONE_SHOT].sort());
    expect(services.temporal.image).toBe('temporalio/server:1.29.1');
    expect(services['temporal-schema'].image).toBe('temporalio/admin-tools:1.29.1-tctl-1.18.4-cli-1.5.0');
    expect(services['temporal-create-namespace'].image).toBe(services['temporal-schema'].image);
    expect(services['temporal-ui'].image).toBe('temporalio/ui:2.42.1');
    expect(services.temporal.environment?.DB).toBe('postgres12');
    expect(services.worker.build).toBeDefined();
    expect(services.simulator.build).toBeDefined();
  });

  it("mounts the server's dynamic config, which turns eager activity dispatch on", () => {
    const mount = (services.temporal.volumes ?? []).find((volume) => String(volume).includes('dynamicconfig'));
    expect(mount).toBeDefined();
    const [source, target] = String(mount).split(':');
    expect(`/etc/temporal/${services.temporal.environment?.DYNAMIC_CONFIG_FILE_PATH}`).toBe(target);
    expect(readFileSync(path.resolve(ROOT, source), 'utf8')).toMatch(
      /^system\.enableActivityEagerExecution:\n {2}- value: true$/m,
    );
  });

  it('uses no auto-setup image, which Temporal no longer builds', () => {
    for (const service of Object.values(services)) expect(service.image ?? '').not.toMatch(/auto-setup/);
  });

  it('restarts the long-running services and retries the one-shots only when they fail', () => {
    for (const name of LONG_RUNNING) expect([name, services[name].restart]).toEqual([name, 'unless-stopped']);
    for (const name of ONE_SHOT) expect([name, services[name].restart]).toEqual([name, 'on-failure:3']);
  });

  it('starts the worker only after the schema, the server and the namespace are ready', () => {
    const dependency = (name: string) => services[name].depends_on ?? {};
    expect(dependency('temporal-schema')).toEqual({ postgresql: { condition: 'service_healthy' } });
    expect(dependency('temporal')).toEqual({ 'temporal-schema': { condition: 'service_completed_successfully' } });
    expect(dependency('temporal-create-namespace')).toEqual({ temporal: { condition: 'service_healthy' } });
    expect(dependency('worker')).toEqual({
      'temporal-create-namespace': { condition: 'service_completed_successfully' },
      simulator: { condition: 'service_healthy' },
    });
    expect(services['temporal-create-namespace'].environment?.TEMPORAL_NAMESPACE).toBe(
      services.worker.environment?.TEMPORAL_NAMESPACE,
    );
    const custom = resolvedCompose({ TEMPORAL_NAMESPACE: 'agents' });
    expect(custom['temporal-create-namespace'].environment?.TEMPORAL_NAMESPACE).toBe('agents');
    expect(custom.worker.environment?.TEMPORAL_NAMESPACE).toBe('agents');
  });

  it('gives the worker longer to stop than its shutdown grace, so in-flight calls finish before the SIGKILL', () => {
    const seconds = Number(/^(\d+)s$/.exec(services.worker.stop_grace_period ?? '')?.[1]);
    expect(seconds * 1000).toBeGreaterThan(Number(services.worker.environment?.FANOUT_SHUTDOWN_GRACE_MS) + 5000);
  });

  it('publishes the ports the README names', () => {
    const published = (name: string) => services[name].ports?.map((port) => Number(port.published));
    expect(published('temporal')).toEqual([7233]);
    expect(published('temporal-ui')).toEqual([8233]);
    expect(published('simulator')).toEqual([8787]);
    for (const port of ['7233', '8233', '8787']) expect(readme).toContain(`localhost:${port}`);
    expect(readme).toContain('docker compose up');
  });

  it('points the worker at the simulator only while neither OPENAI_API_KEY nor OPENAI_BASE_URL is set', () => {
    expect(services.worker.environment).toMatchObject({
      TEMPORAL_ADDRESS: 'temporal:7233',
      FANOUT_TASK_QUEUE: 'fanout',
      OPENAI_API_KEY: '',
      OPENAI_BASE_URL: '',
      FANOUT_SIMULATOR_URL: 'http://simulator:8787/v1',
    });
    expect(providerFromEnvironment(services.worker.environment)).toEqual({
      baseURL: 'http://simulator:8787/v1',
      apiKey: 'simulator',
      simulated: true,
    });

    // A real key alone goes to OpenAI, never to the simulator.
    const keyed = resolvedCompose({ OPENAI_API_KEY: 'sk-real' }).worker.environment;
    expect(keyed).toMatchObject({ OPENAI_API_KEY: 'sk-real', OPENAI_BASE_URL: '' });
    expect(providerFromEnvironment(keyed)).toEqual({ baseURL: undefined, apiKey: 'sk-real', simulated: false });

    const provider = resolvedCompose({ OPENAI_API_KEY: 'sk-real', OPENAI_BASE_URL: 'https://llm.example/v1' }).worker
      .environment;
    expect(providerFromEnvironment(provider)).toEqual({
      baseURL: 'https://llm.example/v1',
      apiKey: 'sk-real',
      simulated: false,
    });

    // A keyless local server (Ollama) is called as configured.
    const local = resolvedCompose({ OPENAI_BASE_URL: 'http://ollama:11434/v1' }).worker.environment;
    expect(providerFromEnvironment(local)).toEqual({
      baseURL: 'http://ollama:11434/v1',
      apiKey: 'no-key-set',
      simulated: false,
    });
  });

  it('documents in the README every variable the worker service sets', () => {
    for (const variable of Object.keys(services.worker.environment ?? {})) expect(readme).toContain(variable);
    for (const variable of Object.keys(imageSettings().env)) expect(readme).toContain(variable);
  });
});

describe('the temporal-schema one-shot, run against a real PostgreSQL', () => {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'compose-schema-'));
  let stopPostgres: (() => Promise<void>) | undefined;

  afterAll(async () => {
    await stopPostgres?.();
    rmSync(directory, { recursive: true, force: true });
  });

  it('creates both databases at the newest schema version, and runs again without harm', async () => {
    const postgres = await startPostgres({ directory });
    stopPostgres = postgres.stop;
    const service = resolvedCompose()['temporal-schema'];
    // The admin-tools image's working directory holds schema/; a temporal-server install has the same layout.
    const home = findTemporalServer();
    const env = {
      ...process.env,
      ...service.environment,
      SQL_HOST: '127.0.0.1',
      SQL_PORT: String(postgres.port),
      PATH: `${home}:${process.env.PATH}`,
    };
    for (let round = 1; round <= 2; round += 1) {
      const { stdout } = await run('/bin/sh', scriptOf(service), { cwd: home, env });
      expect(stdout).toContain('schema ready');
    }

    const psql = path.join(findPostgresBinaries(), 'psql');
    for (const [database, schema] of [
      ['temporal', 'temporal'],
      ['temporal_visibility', 'visibility'],
    ]) {
      const newest = readdirSync(path.join(home, 'schema/postgresql/v12', schema, 'versioned'))
        .map((version) => version.replace(/^v/, ''))
        .sort((a, b) => a.localeCompare(b, undefined, { numeric: true }))
        .at(-1);
      const { stdout } = await run(psql, [
        '-h',
        '127.0.0.1',
        '-p',
        String(postgres.port),
        '-U',
        'temporal',
        '-d',
        database,
        '-tAc',
        'SELECT curr_version FROM schema_version',
      ]);
      expect([database, stdout.trim()]).toEqual([database, newest]);
    }
  });
});

describe('the temporal-create-namespace one-shot and the worker service, against a real Temporal server', () => {
  let server: DevServer;
  let simulator: Simulator;

  beforeAll(async () => {
    server = await startDevServer();
    simulator = await startSimulator({ latency: { minMs: 10, maxMs: 10 } });
  });

  afterAll(async () => {
    await simulator?.close();
    await server?.stop();
  });

  it('creates the namespace with the FanoutName search attribute, runs again without harm, and the worker then serves it', async () => {
    const namespace = uniqueName('compose');
    const compose = resolvedCompose({ TEMPORAL_NAMESPACE: namespace });
    const oneShot = compose['temporal-create-namespace'];
    // The admin-tools image has the CLI on PATH as `temporal`; the cached build has a versioned name.
    const cliDirectory = mkdtempSync(path.join(os.tmpdir(), 'temporal-cli-'));
    symlinkSync(findTemporalCli(), path.join(cliDirectory, 'temporal'));
    const env = {
      ...process.env,
      ...oneShot.environment,
      TEMPORAL_ADDRESS: server.address,
      PATH: `${cliDirectory}:${process.env.PATH}`,
    };
    try {
      for (let round = 1; round <= 2; round += 1) {
        const { stdout } = await run('/bin/sh', scriptOf(oneShot), { env });
        expect(stdout).toContain(`namespace ${namespace} ready`);
      }
      // The temporal service's healthcheck (the server image carries the same CLI), pointed at this server.
      const [kind, check] = compose.temporal.healthcheck?.test ?? [];
      expect(kind).toBe('CMD-SHELL');
      await run('/bin/sh', ['-c', check.replace('127.0.0.1:7233', server.address)], { env });
    } finally {
      rmSync(cliDirectory, { recursive: true, force: true });
    }
    const attributes = await server.client.connection.operatorService.listSearchAttributes({ namespace });
    expect(Object.keys(attributes.customAttributes ?? {})).toContain('FanoutName');

    // The worker service's command, with its compose environment and the image's settings (NODE_OPTIONS, health port).
    const image = imageSettings();
    const healthPort = await freePort();
    const workerEnv = {
      ...process.env,
      ...image.env,
      ...compose.worker.environment,
      TEMPORAL_ADDRESS: server.address,
      FANOUT_SIMULATOR_URL: simulator.baseUrl,
      FANOUT_HEALTH_PORT: String(healthPort),
      FANOUT_HEALTH_HOST: '127.0.0.1',
    };
    const [program, ...args] = compose.worker.command ?? [];
    expect(program).toBe('node');
    const worker = spawn(process.execPath, args, { cwd: ROOT, env: workerEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    worker.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => worker.once('exit', (code) => resolve(code)));
    try {
      await waitFor('the worker to poll', () => {
        if (worker.exitCode !== null) throw new Error(`worker exited: ${output}`);
        return output.includes('worker polling');
      });
      expect(output).toContain(`agents call ${simulator.baseUrl} (the simulator`);
      const [, ...healthArgs] = image.healthcheck;
      expect(image.healthcheck[0]).toBe('node');
      await run(process.execPath, healthArgs, { env: workerEnv });

      const fanout = await FanoutClient.connect({
        temporal: { address: server.address, namespace },
        taskQueue: compose.worker.environment?.FANOUT_TASK_QUEUE,
      });
      try {
        const { results } = await fanout.runParallel(
          [{ id: 'compose', prompt: 'hello' }],
          {},
          { name: 'compose-check' },
        );
        expect(results.map((result) => result.status)).toEqual(['ok']);
      } finally {
        await fanout.close();
      }
      expect(simulator.log().filter((request) => request.taskId === 'compose')).toHaveLength(1);
    } finally {
      worker.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    // Stopped: the image's HEALTHCHECK now fails.
    await expect(run(process.execPath, image.healthcheck.slice(1), { env: workerEnv })).rejects.toThrow();
  });
});
