import { Command, InvalidArgumentError } from 'commander';
import { cacheFromFlags, withCacheOptions, type CacheFlags } from '../cache-flags';
import { SingleBar, Presets } from 'cli-progress';
import type { BatchHandle } from '../../client/batch-client';
import { QueryGate } from '../../client/query-gate';
import { batchRouteSchema, parseDuration, type BatchRoute } from '../../contract/route-options';
import {
  BATCH_DEFAULTS,
  MAX_BATCH_CONCURRENCY,
  MAX_ITEMS_PER_ACTIVITY,
  type BatchOptions,
  type BatchProgress,
  type BatchSummary,
} from '../../contract/batch';
import { CliError, describeError, ExitCode } from '../errors';
import { clientCommand, positiveNumber, promptCacheOf, wholeNumber, type ConnectionFlags } from '../options';
import type { PromptCache } from '../../contract/agent-task';
import { formatCost, formatPacing, formatTokens } from '../report';
import { formatAgentEvent, runningAgents } from '../agent-view';
import { pause } from '../pause';

interface BatchFlags extends ConnectionFlags {
  json?: boolean;
  watch?: boolean;
}

interface StartFlags extends BatchFlags, CacheFlags {
  out: string;
  id?: string;
  concurrency?: number;
  failFast?: boolean;
  attempts?: number;
  agentTimeout?: number;
  budgetUsd?: number;
  itemsPerActivity?: number;
  windowCalls?: number;
  route?: BatchRoute;
  deadline?: number;
  api?: 'chat' | 'responses';
  promptCache?: PromptCache;
}

function routeOf(value: string): BatchRoute {
  const parsed = batchRouteSchema.safeParse(value);
  if (!parsed.success)
    throw new InvalidArgumentError(`"${value}" is not a route (use ${batchRouteSchema.options.join(', ')})`);
  return parsed.data;
}

function durationOf(value: string): number {
  try {
    return parseDuration(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/** One line per provider batch of a provider-batch route: its id, the provider's status word and its counts. */
function formatProviderBatches(batches: BatchSummary['providerBatches'], indent: string): string[] {
  return (batches ?? []).map(
    (batch) =>
      `${indent}${batch.provider} batch ${batch.id}: ${batch.status}, ${batch.counts.succeeded} ok, ${batch.counts.failed} failed, ${batch.counts.processing} processing of ${batch.counts.total}`,
  );
}

function formatRoute(route: BatchSummary['route'], savingsUsd: number | undefined, indent: string): string[] {
  if (!route || route === 'sync') return [];
  return [
    `${indent}route ${route}${savingsUsd === undefined ? '' : `, saved $${savingsUsd.toFixed(4)} against the standard price`}`,
  ];
}

function formatProgress(progress: BatchProgress): string {
  const eta = progress.etaSeconds === null ? '?' : `${Math.round(progress.etaSeconds)}s`;
  return [
    `batch ${progress.batchId}: ${progress.state}`,
    `  done ${progress.done}/${progress.total} (ok ${progress.succeeded}, failed ${progress.failed}), in flight ${progress.inFlight}, pending ${progress.pending}` +
      (progress.alreadyOk > 0 ? `, already ok before this resume ${progress.alreadyOk}` : ''),
    `  ${progress.callsPerSecond.toFixed(1)} calls/s, ETA ${eta}, tokens ${formatTokens(progress.tokens)}, cost ${formatCost(progress.cost)}, run ${progress.runs} (history ${progress.historyLength} events)`,
    ...formatRoute(progress.route, progress.savingsUsd, '  '),
    ...formatProviderBatches(progress.providerBatches, '  '),
    ...formatPacing(progress.pacing, '  '),
  ].join('\n');
}

function formatSummary(summary: BatchSummary): string {
  return [
    `batch ${summary.batchId} finished${summary.stoppedBy ? ` (stopped early: ${summary.stoppedBy})` : ''}`,
    `  ok ${summary.succeeded}, failed ${summary.failed}, not run ${summary.notRun}${summary.alreadyOk ? `, already ok ${summary.alreadyOk}` : ''} of ${summary.total}`,
    `  wall ${(summary.wallMs / 1000).toFixed(1)}s, tokens ${formatTokens(summary.tokens)}, cost ${formatCost(summary.cost)}, runs ${summary.runs}, largest run history ${summary.largestRunHistory} events`,
    `  results: ${summary.sink}`,
    ...formatRoute(summary.route, summary.savingsUsd, '  '),
    ...formatProviderBatches(summary.providerBatches, '  '),
    ...formatPacing(summary.pacing, '  '),
  ].join('\n');
}

function exitCodeFor(summary: BatchSummary): number {
  return summary.failed === 0 && summary.notRun === 0 ? ExitCode.ok : ExitCode.agentsFailed;
}

/** Shows a progress bar until the batch ends, then its summary. */
async function watch(handle: BatchHandle, json: boolean): Promise<void> {
  const bar = json
    ? undefined
    : new SingleBar(
        {
          format:
            'batch {bar} {value}/{total} | ok {ok} failed {failed} | in flight {inFlight} | {rate}/s | ETA {etaText}',
          hideCursor: true,
        },
        Presets.shades_classic,
      );
  let started = false;
  const outcome = handle.result().then(
    (summary) => ({ summary }),
    (error: unknown) => ({ error }),
  );
  let finished: Awaited<typeof outcome> | undefined;
  void outcome.then((value) => (finished = value));
  // Each progress query is a billed action on Temporal Cloud: query when a free describe shows the batch moved, every 5 s at most.
  const gate = new QueryGate(handle.movement, { minIntervalMs: 5000 });
  // The steps and tool calls of the batch's agent items, each read on from its cursor (an agent that ended, once more).
  const agentCursors = new Map<string, number>();
  const agentsFinished = new Set<string>();
  const printAgentEvents = async (agentIds: readonly string[]): Promise<void> => {
    if (agentIds.length === 0 && agentCursors.size === 0) return;
    const agents = await runningAgents(
      handle.workflow.client,
      { workflowId: handle.batchId, type: 'batch', batchAgents: agentIds },
      { cursors: agentCursors, finished: agentsFinished },
    );
    for (const { workflowId, progress: agent } of agents) {
      for (const event of agent.events) {
        agentCursors.set(workflowId, event.seq);
        if (bar && started) bar.stop();
        started = false;
        process.stdout.write(
          `${json ? JSON.stringify({ agent: workflowId, ...event }) : formatAgentEvent(agent.taskId, event)}\n`,
        );
      }
    }
  };
  // The agents' events being read, if any: the last read (below) waits for it, so no event is printed twice or lost.
  let readingAgents: Promise<void> = Promise.resolve();
  const look = async (): Promise<void> => {
    if (!(await gate.due())) return;
    const progress = await handle.progress();
    if (finished !== undefined) return;
    readingAgents = printAgentEvents(progress.runningAgents ?? []);
    await readingAgents;
    // The result came meanwhile: the summary follows, and a progress line after it would no longer be the last line.
    if (finished !== undefined) return;
    const payload = {
      ok: progress.succeeded,
      failed: progress.failed,
      inFlight: progress.inFlight,
      rate: progress.callsPerSecond.toFixed(1),
      etaText: progress.etaSeconds === null ? '?' : `${Math.round(progress.etaSeconds)}s`,
    };
    // The total is known once the first run has scanned the file; until then there is no bar to fill.
    if (bar && !started && progress.state !== 'scanning') {
      bar.start(progress.total, progress.done, payload);
      started = true;
    } else if (bar && started) {
      bar.setTotal(progress.total);
      bar.update(progress.done, payload);
    }
    if (json) process.stdout.write(`${JSON.stringify(progress)}\n`);
  };
  while (finished === undefined) {
    // A look still under way when the result arrives is left to end on its own (a query on a batch that has just
    // closed may wait for a worker to replay it): the summary says more than its progress would.
    await Promise.race([
      look().catch(() => {
        // between runs (continue-as-new) a query can miss; the next one answers
      }),
      outcome,
    ]);
    if (finished === undefined) await pause(1000, outcome);
  }
  await readingAgents.catch(() => undefined);
  // The agents that ended since the last look, once more for their last events (a closed workflow still answers queries).
  await printAgentEvents([]).catch(() => undefined);
  bar?.stop();
  if ('error' in finished) {
    // Ended cancelled, failed, terminated or timed out: exit 1, as `batch status` says of it once it has ended.
    const status = await handle.workflow.describe().then(
      (description) => description.status.name,
      () => undefined,
    );
    if (status === undefined || status === 'RUNNING' || status === 'COMPLETED') throw finished.error;
    throw new CliError(
      `${describeError(finished.error)}; \`fanout batch resume ${handle.batchId}\` runs what is not done`,
      ExitCode.agentsFailed,
    );
  }
  process.stdout.write(json ? `${JSON.stringify(finished.summary)}\n` : `${formatSummary(finished.summary)}\n`);
  process.exitCode = exitCodeFor(finished.summary);
}

async function report(
  handle: BatchHandle,
  flags: BatchFlags,
  recover: (batchId: string) => Promise<{ sink: string; bytes: number } | undefined>,
): Promise<void> {
  if (flags.watch) return watch(handle, Boolean(flags.json));
  const description = await handle.workflow.describe();
  if (description.status.name === 'RUNNING') {
    const progress = await handle.progress();
    process.stdout.write(flags.json ? `${JSON.stringify(progress)}\n` : `${formatProgress(progress)}\n`);
    return;
  }
  if (description.status.name === 'COMPLETED') {
    const summary = await handle.result();
    process.stdout.write(flags.json ? `${JSON.stringify(summary)}\n` : `${formatSummary(summary)}\n`);
    process.exitCode = exitCodeFor(summary);
    return;
  }
  let reason: string | undefined;
  if (description.status.name === 'FAILED')
    reason = await handle.result().then(
      () => undefined,
      (error: unknown) => describeError(error),
    );
  const recovered = await recover(handle.batchId);
  const parts = [
    `batch ${handle.batchId}: ${description.status.name.toLowerCase()}${reason ? ` (${reason})` : ''}`,
    ...(recovered ? [`${recovered.bytes} bytes of finished results written to ${recovered.sink}`] : []),
    `\`fanout batch resume ${handle.batchId}\` runs what is not done`,
  ];
  process.stdout.write(
    flags.json
      ? `${JSON.stringify({ batchId: handle.batchId, status: description.status.name, ...(reason ? { error: reason } : {}), ...(recovered ? { recovered } : {}) })}\n`
      : `${parts.join('; ')}\n`,
  );
  process.exitCode = ExitCode.agentsFailed;
}

/**
 * Says what a start or resume did (`json` on stdout with --json alone; else `said` on stderr, which a progress bar or
 * JSON progress lines then follow), then watches the batch with --watch.
 */
async function announce(handle: BatchHandle, flags: BatchFlags, json: object, said: string): Promise<void> {
  if (flags.json && !flags.watch) process.stdout.write(`${JSON.stringify(json)}\n`);
  else process.stderr.write(`${said}\n`);
  if (flags.watch) await watch(handle, Boolean(flags.json));
}

/** `fanout batch <name> <batch-id>`, with --watch and --json. */
function onBatch(name: string, description: string): Command {
  return new Command(name)
    .description(description)
    .argument('<batch-id>')
    .option('--watch', 'progress bar until it ends')
    .option('--json', 'print JSON');
}

export function batchCommand(): Command {
  const batch = new Command('batch').description(
    'long-running batches over a JSONL file: start, status, cancel, resume',
  );

  batch.addCommand(
    clientCommand(
      withCacheOptions(new Command('start'))
        .description('validate a JSONL task file and start a batch (or attach to the batch of that id)')
        .argument('<tasks.jsonl>', 'one task per line: a local path every worker can read, or s3://bucket/key')
        .requiredOption(
          '--out <results.jsonl>',
          'result sink, one line per task id: a local path every worker can write, or s3://bucket/key',
        )
        .option('--id <batch-id>', 'batch id (default batch-<random>); an existing id is attached to, never run twice')
        .option(
          '-c, --concurrency <n>',
          `calls in flight across the batch (1-${MAX_BATCH_CONCURRENCY}, default ${BATCH_DEFAULTS.concurrency})`,
          wholeNumber(1, MAX_BATCH_CONCURRENCY),
        )
        .option('--fail-fast', 'stop the batch at the first failure that will not be retried')
        .option('--attempts <n>', 'attempts per item (default 5)', wholeNumber(1, 100))
        .option('--agent-timeout <ms>', 'deadline of one attempt', wholeNumber(100))
        .option(
          '--budget-usd <dollars>',
          'once the answered items cost this much, cancel the calls in flight and run no more (costBudgetUsd)',
          positiveNumber,
        )
        .option(
          '--items-per-activity <n>',
          `most items one activity runs, one after another (1-${MAX_ITEMS_PER_ACTIVITY}; default: about 45 s of calls, fewer near the end)`,
          wholeNumber(1, MAX_ITEMS_PER_ACTIVITY),
        )
        .option(
          '--window-calls <n>',
          `most calls one window workflow keeps in flight; a wider batch runs in stripes side by side (default ${BATCH_DEFAULTS.windowCalls})`,
          wholeNumber(1, MAX_BATCH_CONCURRENCY),
        )
        .option(
          '--route <route>',
          'how the calls are sent: sync (default), flex, provider-batch (half price, answers within the deadline), auto',
          routeOf,
        )
        .option(
          '--deadline <duration>',
          'when the answers are needed, e.g. 24h (provider-batch and auto; flex falls back to the standard tier near it)',
          durationOf,
        )
        .option('--api <api>', 'chat (chat completions, the default) or responses (/v1/responses)', (value: string) => {
          if (value !== 'chat' && value !== 'responses')
            throw new InvalidArgumentError(`"${value}" is not an API (use chat or responses)`);
          return value;
        })
        .option(
          '--prompt-cache <ttl>',
          "Anthropic's prompt cache for items that set none: 1h (default for a batch's sync calls), 5m or off",
          promptCacheOf,
        )
        .option('--watch', 'show a progress bar until the batch ends')
        .option('--json', 'print JSON'),
      async (fanout, source, flags: StartFlags) => {
        const cache = cacheFromFlags(flags);
        const options: BatchOptions = {
          ...(flags.concurrency === undefined ? {} : { concurrency: flags.concurrency }),
          ...(flags.failFast ? { errorPolicy: 'fail-fast' as const } : {}),
          ...(flags.attempts === undefined ? {} : { retry: { maximumAttempts: flags.attempts } }),
          ...(flags.agentTimeout === undefined ? {} : { agentTimeoutMs: flags.agentTimeout }),
          ...(flags.budgetUsd === undefined ? {} : { costBudgetUsd: flags.budgetUsd }),
          ...(flags.itemsPerActivity === undefined ? {} : { itemsPerActivity: flags.itemsPerActivity }),
          ...(flags.windowCalls === undefined ? {} : { windowCalls: flags.windowCalls }),
          ...(flags.route === undefined ? {} : { route: flags.route }),
          ...(flags.deadline === undefined ? {} : { deadlineMs: flags.deadline }),
          ...(flags.api === undefined ? {} : { api: flags.api }),
          ...(cache ? { cache } : {}),
          ...(flags.promptCache === undefined ? {} : { promptCache: flags.promptCache }),
        };
        const handle = await fanout.startBatch({ source, sink: flags.out, batchId: flags.id, options });
        const said = `${handle.attached ? 'attached to existing' : 'started'} batch ${handle.batchId}`;
        await announce(handle, flags, { batchId: handle.batchId, attached: handle.attached }, said);
      },
    ),
  );

  batch.addCommand(
    clientCommand(
      onBatch('status', 'progress of a running batch, or the summary of a finished one'),
      (fanout, batchId, flags: BatchFlags) =>
        report(fanout.getBatch(batchId), flags, (id) => fanout.recoverStoppedBatch(id)),
    ),
  );

  batch.addCommand(
    clientCommand(
      new Command('cancel')
        .description(
          'cancel a batch and wait for it to end: in-flight calls are aborted, every answered one is written to the sink',
        )
        .argument('<batch-id>')
        .option('--no-wait', 'return once the cancel is requested, not once the batch has ended')
        .option('--json', 'print JSON'),
      async (fanout, batchId, flags: BatchFlags & { wait?: boolean }) => {
        const wait = flags.wait !== false;
        const outcome = await fanout.getBatch(batchId).cancel({ wait });
        const said = {
          cancelled: `batch ${batchId} cancelled; its answered results are in its sink`,
          // It was writing its sink when the cancel came: every item has its line, and `batch status` shows the summary.
          finished: `batch ${batchId} finished before the cancel reached it; its results are in its sink`,
          failed: `batch ${batchId} ended failed; \`fanout batch status ${batchId}\` says why`,
          requested: `cancel requested for batch ${batchId}`,
        }[outcome];
        process.stdout.write(
          flags.json ? `${JSON.stringify({ batchId, cancelRequested: true, ended: wait, outcome })}\n` : `${said}\n`,
        );
      },
    ),
  );

  batch.addCommand(
    clientCommand(
      withCacheOptions(onBatch('resume', 're-run the failed and never-run items of a finished or cancelled batch')),
      async (fanout, batchId, flags: BatchFlags & CacheFlags) => {
        // The batch's own cache (its memo) unless the flags name another.
        const cache = cacheFromFlags(flags);
        const handle = await fanout.resumeBatch(batchId, cache ? { cache } : undefined);
        await announce(handle, flags, { batchId, resumed: true }, `resumed batch ${batchId}`);
      },
    ),
  );

  return batch;
}
