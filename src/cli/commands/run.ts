import { Command } from 'commander';
import { FANOUT_CLIENT_DEFAULTS, FanoutClient, type RunHandle } from '../../client/fanout-client';
import { readRunFile } from '../../client/task-file';
import type { DagResult, FanOutFanInResult } from '../../contract/dag';
import { temporalUiUrl } from '../../config/environment';
import type { FanOutOptions, FanOutResult } from '../../contract/fan-out';
import { MAX_IN_FLIGHT_PER_RUN } from '../../contract/limits';
import { RUN_OPTION_DEFAULTS } from '../../contract/run-option-defaults';
import { validateDagInput, validateFanOutFanInInput, validateFanOutInput } from '../../contract/validation';
import { ExitCode } from '../errors';
import {
  connectionOptions,
  positiveNumber,
  promptCacheOf,
  temporalOverrides,
  wholeNumber,
  type ConnectionFlags,
} from '../options';
import type { PromptCache } from '../../contract/agent-task';
import { formatRunReport } from '../report';
import { runEndedError } from '../run-result';
import { watchRun } from './watch';
import { cacheFromFlags, withCacheOptions, type CacheFlags } from '../cache-flags';
import { resolveCacheSettings } from '../../client/cache-settings';
import { storeFromEnvironment } from '../../store';
import { checkWorkflowId } from '../../client/workflow-id';

interface RunFlags extends ConnectionFlags, CacheFlags {
  parallel?: number;
  failFast?: boolean;
  json?: boolean;
  watch?: boolean;
  id?: string;
  name?: string;
  agentTimeout?: number;
  timeout?: number;
  attempts?: number;
  budgetUsd?: number;
  promptCache?: PromptCache;
}

/** File options, overridden by flags. */
function mergeOptions(fromFile: FanOutOptions | undefined, flags: RunFlags): FanOutOptions {
  const cache = cacheFromFlags(flags);
  return {
    ...fromFile,
    ...(flags.parallel === undefined ? {} : { maxParallel: flags.parallel }),
    ...(flags.failFast ? { errorPolicy: 'fail-fast' as const } : {}),
    ...(flags.agentTimeout === undefined ? {} : { agentTimeoutMs: flags.agentTimeout }),
    ...(flags.timeout === undefined ? {} : { runTimeoutMs: flags.timeout }),
    ...(flags.attempts === undefined ? {} : { retry: { ...fromFile?.retry, maximumAttempts: flags.attempts } }),
    ...(flags.budgetUsd === undefined ? {} : { costBudgetUsd: flags.budgetUsd }),
    ...(cache ? { cache } : {}),
    ...(flags.promptCache === undefined ? {} : { promptCache: flags.promptCache }),
  };
}

/** Exit code of a finished run: non-zero when any agent did not succeed. */
export function exitCodeFor(result: Pick<FanOutResult, 'metrics'>): number {
  return result.metrics.succeeded === result.metrics.total ? ExitCode.ok : ExitCode.agentsFailed;
}

export function runCommand(): Command {
  const command = new Command('run')
    .description(
      'run a file as a fan-out, a DAG (tasks with dependsOn) or a fan-out/fan-in (a synthesis key), and print every result in input order',
    )
    .argument(
      '<file>',
      'tasks: .jsonl (one task per line) or .json (an array, or { "tasks": [...], "options": {...} })',
    )
    .option(
      '-p, --parallel <n>',
      `most agents in flight at once (1-${MAX_IN_FLIGHT_PER_RUN})`,
      wholeNumber(1, MAX_IN_FLIGHT_PER_RUN),
    )
    .option('--fail-fast', 'cancel the other agents at the first failure that will not be retried')
    .option(
      '--attempts <n>',
      `attempts per agent, the first included (default ${RUN_OPTION_DEFAULTS.retry.maximumAttempts})`,
      wholeNumber(1, 100),
    )
    .option('--agent-timeout <ms>', 'deadline of one attempt of one agent', wholeNumber(100))
    .option('--timeout <ms>', 'deadline of the whole run; agents still running are cancelled', wholeNumber(100))
    .option(
      '--budget-usd <dollars>',
      'once the answered calls cost this much, cancel the calls in flight and skip the rest (costBudgetUsd)',
      positiveNumber,
    )
    .option(
      '--prompt-cache <ttl>',
      "Anthropic's prompt cache for tasks that set none: 5m (default), 1h or off (promptCache)",
      promptCacheOf,
    )
    .option(
      '--id <workflow-id>',
      `workflow id of the run (default ${FANOUT_CLIENT_DEFAULTS.workflowIdPrefix.fanOut}-<random>)`,
    )
    .option('--name <name>', 'a name to find the run by (fanout list --name; search attribute FanoutName)')
    .option('--watch', 'show a progress bar and live events while it runs')
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      '\nExit code: 0 when every agent succeeded, 1 when any failed or was cancelled, 2 for bad input.',
    );
  withCacheOptions(command);
  for (const option of connectionOptions()) command.addOption(option);
  return command.action(async (file: string, flags: RunFlags) => {
    const runFile = readRunFile(file);
    const options = mergeOptions(runFile.options, flags);
    // Validated again with the flags applied, before anything starts.
    if (runFile.kind === 'dag') validateDagInput({ nodes: runFile.nodes, options });
    else if (runFile.kind === 'fanOutFanIn')
      validateFanOutFanInInput({ tasks: runFile.tasks, synthesis: runFile.synthesis, options });
    else validateFanOutInput({ tasks: runFile.tasks, options });
    if (flags.id !== undefined) checkWorkflowId(flags.id);
    // The answer cache checked before connecting too (the client checks it again, as for any caller).
    const cache = await resolveCacheSettings(options.cache, storeFromEnvironment().store);
    if (cache) options.cache = cache;
    const fanout = await FanoutClient.connect({ temporal: temporalOverrides(flags), taskQueue: flags.taskQueue });
    try {
      const start = { workflowId: flags.id, name: flags.name };
      const handle: RunHandle<FanOutResult | DagResult | FanOutFanInResult> =
        runFile.kind === 'dag'
          ? await fanout.startDag(runFile.nodes, options, start)
          : runFile.kind === 'fanOutFanIn'
            ? await fanout.startFanOutFanIn(runFile.tasks, runFile.synthesis, options, start)
            : await fanout.startParallel(runFile.tasks, options, start);
      if (!flags.json) {
        process.stderr.write(`started ${runFile.kind} ${handle.workflowId}\n`);
        process.stderr.write(`Temporal UI: ${temporalUiUrl(fanout.namespace, handle.workflowId)}\n`);
      }
      if (flags.watch) {
        await watchRun(handle, { json: flags.json });
        return;
      }
      const result = await handle.result().catch(async (error: unknown) => {
        throw await runEndedError(handle, error);
      });
      const lines = [formatRunReport(result)];
      if ('groups' in result) {
        lines.push(`parallel groups: ${result.groups.map((group) => `[${group.join(', ')}]`).join(' -> ')}`);
        lines.push(
          `critical path: ${result.metrics.criticalPath.path.join(' -> ')} (${(result.metrics.criticalPath.lengthMs / 1000).toFixed(2)}s)`,
        );
      }
      if ('synthesis' in result)
        lines.push(
          `\nsynthesis (${result.synthesis.status}):\n${result.synthesis.output ?? result.synthesis.error?.message ?? ''}`,
        );
      process.stdout.write(
        flags.json
          ? `${JSON.stringify({ workflowId: handle.workflowId, kind: runFile.kind, ...result }, null, 2)}\n`
          : `${lines.join('\n')}\n`,
      );
      const synthesisOk = !('synthesis' in result) || result.synthesis.status === 'ok';
      process.exitCode = synthesisOk ? exitCodeFor(result) : ExitCode.agentsFailed;
    } finally {
      await fanout.close();
    }
  });
}
