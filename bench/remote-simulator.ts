import { spawn } from 'node:child_process';
import path from 'node:path';
import type { SimulatedRequest } from '../src/sim/simulator';

/** The simulator in its own process (`fanout sim`), as a remote provider would be, read over HTTP. */
export interface RemoteSimulator {
  baseUrl: string;
  log(): Promise<SimulatedRequest[]>;
  reset(): Promise<void>;
  close(): Promise<void>;
}

export async function spawnSimulator(args: string[]): Promise<RemoteSimulator> {
  const cli = path.join(__dirname, '..', 'dist', 'cli', 'main.js');
  const child = spawn(process.execPath, [cli, 'sim', '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  const baseUrl = await new Promise<string>((resolve, reject) => {
    let output = '';
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /OPENAI_BASE_URL=(\S+)/.exec(output);
      if (match) resolve(match[1]);
    });
    child.once('exit', (code) => reject(new Error(`simulator exited with ${code}: ${output}`)));
  });
  const admin = baseUrl.replace(/\/v1$/, '/_sim');
  return {
    baseUrl,
    log: async () => ((await (await fetch(`${admin}/log`)).json()) as { requests: SimulatedRequest[] }).requests,
    reset: async () => {
      await fetch(`${admin}/reset`, { method: 'POST' });
    },
    close: async () => {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}
