import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { diesWithParent, exitOf } from '../../src/local/child-processes';
import { ensureTool } from '../../src/local/ensure-tool';
import { freePort } from '../../src/local/free-port';
import { FatalWaitError, waitFor } from '../../src/local/wait-for';

/** Arize Phoenix, an LLM trace viewer: OTLP over HTTP in, its UI and GraphQL API out, data in a directory of its own. */
export interface Phoenix {
  /** The UI, and the OTLP/HTTP endpoint for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter adds /v1/traces). */
  readonly url: string;
  /** Asks Phoenix's GraphQL API. */
  graphql<T>(query: string): Promise<T>;
  stop(): Promise<void>;
}

/**
 * Starts Phoenix (scripts/ensure-phoenix.sh finds it or installs it once per machine) on free ports of 127.0.0.1, its
 * telemetry off, and returns once its UI answers.
 */
export async function startPhoenix(): Promise<Phoenix> {
  const binary = ensureTool('ensure-phoenix.sh', 'no Phoenix is available (see the messages above); set PHOENIX_BIN');
  const directory = mkdtempSync(path.join(tmpdir(), 'fanout-phoenix-'));
  const port = await freePort();
  const [command, args] = diesWithParent(binary, ['serve'], 'TERM');
  let output = '';
  const child: ChildProcess = spawn(command, args, {
    env: {
      ...process.env,
      PHOENIX_HOST: '127.0.0.1',
      PHOENIX_PORT: String(port),
      PHOENIX_GRPC_PORT: String(await freePort()),
      PHOENIX_WORKING_DIR: directory,
      PHOENIX_TELEMETRY_ENABLED: 'false',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    child.kill('SIGTERM');
    await exitOf(child);
    rmSync(directory, { recursive: true, force: true });
  };
  try {
    await waitFor(
      'Phoenix to answer',
      async () => {
        if (child.exitCode !== null)
          throw new FatalWaitError(new Error(`phoenix exited with ${child.exitCode}: ${output}`));
        const answered = await fetch(url).catch(() => undefined);
        return answered?.ok ? true : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 500 },
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url,
    stop,
    graphql: async <T>(query: string) => {
      const response = await fetch(`${url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query }),
      });
      const body = (await response.json()) as { data?: T; errors?: unknown };
      if (!response.ok || body.errors || !body.data) throw new Error(`Phoenix answered ${JSON.stringify(body)}`);
      return body.data;
    },
  };
}
