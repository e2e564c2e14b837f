import { Command, InvalidArgumentError, Option } from 'commander';
import { FanoutClient } from '../client/fanout-client';
import type { TemporalConnectionConfig } from '../config/environment';
import { promptCacheSchema, type PromptCache } from '../contract/agent-task';

/** A commander parser for a whole number in [min, max], naming the option on error. */
export function wholeNumber(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const parsed = Number(value);
    if (!Number.isInteger(parsed) || parsed < min || parsed > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}, got "${value}"`);
    }
    return parsed;
  };
}

/** A commander parser for a positive number. */
/** `--prompt-cache`: Anthropic's prompt cache, 5m, 1h or off. */
export function promptCacheOf(value: string): PromptCache {
  const parsed = promptCacheSchema.safeParse(value);
  if (!parsed.success) throw new InvalidArgumentError(`"${value}" is not a prompt cache (use 5m, 1h or off)`);
  return parsed.data;
}

export function positiveNumber(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed <= 0)
    throw new InvalidArgumentError(`expected a positive number, got "${value}"`);
  return parsed;
}

export interface ConnectionFlags {
  address?: string;
  namespace?: string;
  taskQueue?: string;
}

/** --address, --namespace and --task-queue, each defaulting to its environment variable. */
export function connectionOptions(): Option[] {
  return [
    new Option('--address <host:port>', 'Temporal frontend address').env('TEMPORAL_ADDRESS'),
    new Option('--namespace <name>', 'Temporal namespace').env('TEMPORAL_NAMESPACE'),
    new Option('--task-queue <name>', 'task queue of the workers').env('FANOUT_TASK_QUEUE'),
  ];
}

export function temporalOverrides(flags: ConnectionFlags): Partial<TemporalConnectionConfig> {
  return {
    ...(flags.address ? { address: flags.address } : {}),
    ...(flags.namespace ? { namespace: flags.namespace } : {}),
  };
}

/** Adds the connection options to a command and makes its usage errors throw (main maps them to exit code 2). */
export function withConnection(command: Command): Command {
  for (const option of connectionOptions()) command.addOption(option);
  return command.exitOverride();
}

/** Runs `work` with a client connected from the flags, and closes it. */
export async function withClient<T>(flags: ConnectionFlags, work: (fanout: FanoutClient) => Promise<T>): Promise<T> {
  const fanout = await FanoutClient.connect({ temporal: temporalOverrides(flags), taskQueue: flags.taskQueue });
  try {
    return await work(fanout);
  } finally {
    await fanout.close();
  }
}

/**
 * `command`, whose one argument names what it acts on (a run, a batch, a task file), with the connection options: it
 * runs `work` with a client connected from them, closed after.
 */
export function clientCommand<F extends ConnectionFlags>(
  command: Command,
  work: (fanout: FanoutClient, argument: string, flags: F) => Promise<void>,
): Command {
  return withConnection(command).action(async (argument: string, flags: F) =>
    withClient(flags, (fanout) => work(fanout, argument, flags)),
  );
}

/** `fanout <name> <id>`: a command on one run, with --json (`json` says what it prints). */
export function onRun(name: string, description: string, json = 'print JSON'): Command {
  return new Command(name).description(description).argument('<id>').option('--json', json);
}
