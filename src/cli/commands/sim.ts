import { Command, InvalidArgumentError } from 'commander';
import { faultKinds, type FaultKind } from '../../sim/config';
import { startSimulator } from '../../sim/simulator';
import { positiveNumber, wholeNumber } from '../options';

interface SimFlags {
  port: number;
  host: string;
  latency?: { minMs: number; maxMs: number };
  seed?: string;
  fault?: Partial<Record<FaultKind, number>>;
  retryAfter?: number;
  apiKey?: string;
}

function latencyRange(value: string): { minMs: number; maxMs: number } {
  const [min, max = min] = value.split('-').map(Number);
  if (!Number.isFinite(min) || !Number.isFinite(max) || min < 0 || max < min) {
    throw new InvalidArgumentError(`expected <ms> or <min>-<max> in ms, got "${value}"`);
  }
  return { minMs: min, maxMs: max };
}

function faultRate(
  value: string,
  previous: Partial<Record<FaultKind, number>> = {},
): Partial<Record<FaultKind, number>> {
  const [kind, rate] = value.split('=');
  if (!(faultKinds as readonly string[]).includes(kind) || !(Number(rate) >= 0 && Number(rate) <= 1)) {
    throw new InvalidArgumentError(
      `expected <kind>=<rate 0-1> with kind one of ${faultKinds.join(', ')}, got "${value}"`,
    );
  }
  return { ...previous, [kind]: Number(rate) };
}

export function simCommand(): Command {
  return new Command('sim')
    .description(
      'run the OpenAI-compatible simulator (simulated completions, latency and faults; request log at /_sim/log)',
    )
    .option('--port <port>', 'port to listen on', wholeNumber(0, 65535), 8787)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--latency <ms|min-max>', 'latency per response, fixed or spread per task (default 50)', latencyRange)
    .option('--seed <seed>', 'seed of the latency spread and fault rolls (default 1)')
    .option('--fault <kind=rate>', `inject a fault at a rate, repeatable; kinds: ${faultKinds.join(', ')}`, faultRate)
    .option('--retry-after <seconds>', 'Retry-After sent with injected 429 and 503', positiveNumber)
    .option('--api-key <key>', 'answer 401 unless this bearer token is sent')
    .action(async (flags: SimFlags) => {
      const simulator = await startSimulator(
        {
          ...(flags.latency === undefined ? {} : { latency: flags.latency }),
          ...(flags.seed === undefined ? {} : { seed: flags.seed }),
          faultRates: flags.fault ?? {},
          ...(flags.retryAfter === undefined ? {} : { retryAfterSeconds: flags.retryAfter }),
          ...(flags.apiKey === undefined ? {} : { requireApiKey: flags.apiKey }),
        },
        { port: flags.port, host: flags.host },
      );
      process.stderr.write(
        `simulator (simulated completions) listening: OPENAI_BASE_URL=${simulator.baseUrl} ANTHROPIC_BASE_URL=${simulator.anthropicBaseUrl}\n`,
      );
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await simulator.close();
    });
}
