import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { ROOT } from './support/paths';

interface ComposeService {
  image?: string;
  build?: unknown;
  ports?: { published: number | string; target: number | string }[];
  environment?: Record<string, string>;
}

/** The compose file as `docker-compose config` resolves it (no Docker engine needed), with `env` set. */
function resolvedCompose(env: Record<string, string> = {}): Record<string, ComposeService> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('OPENAI_') && !key.startsWith('FANOUT_')));
  const yaml = execFileSync('docker-compose', ['-f', path.join(ROOT, 'docker-compose.yml'), 'config'], { encoding: 'utf8', env: { ...clean, ...env } });
  return (parse(yaml) as { services: Record<string, ComposeService> }).services;
}

const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');

describe('docker-compose.yml', () => {
  const services = resolvedCompose();

  it('is valid and holds Temporal on PostgreSQL, its UI, the worker and the simulator', () => {
    expect(Object.keys(services).sort()).toEqual(['postgresql', 'simulator', 'temporal', 'temporal-ui', 'worker']);
    expect(services.temporal.image).toBe('temporalio/auto-setup:1.29.1');
    expect(services['temporal-ui'].image).toBe('temporalio/ui:2.42.1');
    expect(services.temporal.environment?.DB).toBe('postgres12');
    expect(services.worker.build).toBeDefined();
    expect(services.simulator.build).toBeDefined();
  });

  it('publishes the ports the README names', () => {
    const published = (name: string) => services[name].ports?.map((port) => Number(port.published));
    expect(published('temporal')).toEqual([7233]);
    expect(published('temporal-ui')).toEqual([8233]);
    expect(published('simulator')).toEqual([8787]);
    for (const port of ['7233', '8233', '8787']) expect(readme).toContain(`localhost:${port}`);
    expect(readme).toContain('docker compose up');
  });

  it('points the worker at the simulator by default and passes OPENAI_API_KEY / OPENAI_BASE_URL through', () => {
    expect(services.worker.environment).toMatchObject({
      TEMPORAL_ADDRESS: 'temporal:7233',
      FANOUT_TASK_QUEUE: 'fanout',
      OPENAI_BASE_URL: 'http://simulator:8787/v1',
      OPENAI_API_KEY: 'simulator',
    });
    const real = resolvedCompose({ OPENAI_API_KEY: 'sk-real', OPENAI_BASE_URL: 'https://llm.example/v1' });
    expect(real.worker.environment).toMatchObject({ OPENAI_API_KEY: 'sk-real', OPENAI_BASE_URL: 'https://llm.example/v1' });
  });

  it('documents in the README every variable the worker service sets', () => {
    for (const variable of Object.keys(services.worker.environment ?? {})) expect(readme).toContain(variable);
  });
});
