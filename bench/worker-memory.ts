/**
 * `fanout worker`'s peak RSS (launcher and child together, as bench/compare.ts measures it) and CPU per call, for
 * variants of its settings side by side: the 5,000 zero-latency calls at 200 of compare.ts (c) and its 4,000 calls of
 * 3 s at 500 (e), on one dev server and one simulator, each variant's worker its own process tree, rounds rotated.
 *
 *   tsx bench/worker-memory.ts [--only c,e] [--rounds 2] [--variant 'NAME=ARGS' ...]
 *
 * A variant's ARGS are node arguments (those starting with `--`, given to the launcher, which passes them on to the
 * child) and KEY=VALUE environment variables, space-separated: `--variant 'grow100=--heap-growing-percent=100'`.
 * `cli=PATH` runs another build's dist/cli/main.js (e.g. the commit before, built into a directory of this checkout so
 * that it finds node_modules). `default` (this checkout's dist/) always runs. Peak RSS is the sum of each process's VmHWM after a reset at the start
 * of the run (clear_refs), and beside it the child's VmHWM plus only the launcher's private pages (the two share the node
 * binary's pages, which the sum counts twice); CPU is user + system of the process tree from /proc over the run, per call.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { FanoutClient } from '../src/client/fanout-client';
import { startDevServer } from '../src/local/dev-server';
import { startSimulator } from '../src/sim/simulator';
import { cpuSeconds, privateMb, processTree, statusMb } from './proc';
import { fanoutWorkerArgs, startReady, type ReadyProcess } from './ready-process';
import { scratchDirectory } from './scratch';

const CLI = path.join(__dirname, '..', 'dist', 'cli', 'main.js');
const { values: flags } = parseArgs({
  options: {
    only: { type: 'string', default: 'c,e' },
    rounds: { type: 'string', default: '2' },
    variant: { type: 'string', multiple: true, default: [] },
  },
});
const ROUNDS = Number(flags.rounds);
const SCENARIOS = {
  c: { items: 5000, concurrency: 200, latencyMs: 0, slots: undefined },
  e: { items: 4000, concurrency: 500, latencyMs: 3000, slots: '500' },
} as const;
const directory = scratchDirectory('fanout-memory-');

interface Variant {
  name: string;
  cli: string;
  nodeArgs: string[];
  env: Record<string, string>;
}

function parseVariant(spec: string): Variant {
  const [name, ...rest] = spec.split('=');
  const words = rest.join('=').split(/\s+/).filter(Boolean);
  const cli = words.find((word) => word.startsWith('cli='))?.slice('cli='.length);
  const env = Object.fromEntries(
    words
      .filter((word) => !word.startsWith('--') && !word.startsWith('cli='))
      .map((word) => [word.split('=')[0], word.split('=').slice(1).join('=')]),
  );
  return { name, cli: cli ? path.resolve(cli) : CLI, nodeArgs: words.filter((word) => word.startsWith('--')), env };
}

function startWorker(
  { cli, nodeArgs }: Variant,
  env: Record<string, string>,
  address: string,
  taskQueue: string,
  baseUrl: string,
): Promise<ReadyProcess> {
  return startReady('worker', [...nodeArgs, ...fanoutWorkerArgs(cli, address, taskQueue)], {
    ...process.env,
    OPENAI_BASE_URL: baseUrl,
    OPENAI_API_KEY: 'bench',
    ...env,
  });
}

function writeTasks(name: string, count: number): string {
  const file = path.join(directory, `${name}.jsonl`);
  const lines = Array.from({ length: count }, (_, index) =>
    JSON.stringify({ id: `item-${index}`, prompt: `item ${index}` }),
  );
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

async function main(): Promise<void> {
  const variants: Variant[] = [
    { name: 'default', cli: CLI, nodeArgs: [], env: {} },
    ...(flags.variant ?? []).map(parseVariant),
  ];
  const server = await startDevServer();
  const simulator = await startSimulator({ latency: { minMs: 0, maxMs: 0 } });
  const lines: string[] = [];
  try {
    for (const id of flags.only.split(',').map((name) => name.trim()) as (keyof typeof SCENARIOS)[]) {
      const scenario = SCENARIOS[id];
      simulator.configure({ latency: { minMs: scenario.latencyMs, maxMs: scenario.latencyMs } });
      const source = writeTasks(id, scenario.items);
      const warmUp = writeTasks(`${id}-warm-up`, 200);
      const workers = [];
      for (const variant of variants) {
        const taskQueue = `memory-${id}-${variant.name}-${Date.now()}`;
        const env = { ...(scenario.slots ? { FANOUT_MAX_CONCURRENT_ACTIVITIES: scenario.slots } : {}), ...variant.env };
        const worker = await startWorker(variant, env, server.address, taskQueue, simulator.baseUrl);
        await new Promise((resolve) => setTimeout(resolve, 2000));
        const idle = processTree(worker.pid).map((pid) => statusMb(pid, 'VmRSS').toFixed(0));
        console.error(`(${id}) ${variant.name}: RSS ${idle.join(' + ')} MB once polling`);
        workers.push({ variant, worker, fanout: await FanoutClient.connect({ client: server.client, taskQueue }) });
      }
      const samples = new Map<string, string[]>(variants.map((variant) => [variant.name, []]));
      for (let round = 0; round <= ROUNDS; round += 1) {
        for (let step = 0; step < workers.length; step += 1) {
          const { variant, worker, fanout } = workers[(round + step) % workers.length];
          const items = round === 0 ? 200 : scenario.items;
          const pids = processTree(worker.pid);
          for (const pid of pids) writeFileSync(`/proc/${pid}/clear_refs`, '5');
          const cpuBefore = pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
          const startedAt = performance.now();
          const handle = await fanout.startBatch({
            source: round === 0 ? warmUp : source,
            sink: path.join(directory, `sink-${id}-${variant.name}-${round}.jsonl`),
            options: { concurrency: scenario.concurrency },
          });
          const summary = await handle.result();
          const wallMs = performance.now() - startedAt;
          if (summary.succeeded !== items)
            throw new Error(`${variant.name}: ${summary.succeeded} of ${items} succeeded`);
          const rss = pids.map((pid) => statusMb(pid, 'VmHWM'));
          // The launcher's pages counted once: the child's peak and what only the launcher maps (its RSS is mostly the
          // node binary's pages, which the child maps too).
          const once =
            pids.length > 1 ? rss.slice(1).reduce((sum, each) => sum + each, 0) + privateMb(pids[0]) : rss[0];
          const cpu = pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0) - cpuBefore;
          const line = `peak RSS ${rss.reduce((sum, each) => sum + each, 0).toFixed(0)} MB (${rss.map((each) => each.toFixed(0)).join(' + ')}; ${once.toFixed(0)} with the launcher's shared pages once), CPU ${((cpu * 1000) / items).toFixed(2)} ms per call, wall ${(wallMs / 1000).toFixed(1)} s`;
          console.error(`(${id}) round ${round} ${variant.name}: ${line}`);
          if (round > 0) samples.get(variant.name)?.push(line);
        }
      }
      for (const { variant, worker, fanout } of workers) {
        lines.push(`(${id}) ${variant.name}: ${samples.get(variant.name)?.join('; ')}`);
        await fanout.close();
        await worker.stop();
      }
    }
  } finally {
    await simulator.close();
    await server.stop();
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
