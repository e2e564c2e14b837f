import { Command } from 'commander';
import { Presets, SingleBar } from 'cli-progress';
import type { WorkflowHandle } from '@temporalio/client';
import type { AgentResult } from '../../contract/agent-task';
import type { RunProgress } from '../../contract/fan-out';
import { startLocalStack } from '../../local/local-stack';
import { eventsQuery, progressQuery } from '../../workflows/messages';
import { CliError, ExitCode } from '../errors';
import { wholeNumber, withClient, withConnection, type ConnectionFlags } from '../options';
import { formatCost, formatPacing, formatRunReport } from '../report';
import { resolveRunResult } from '../../client/payloads';
import { QueryGate } from '../../client/query-gate';
import { storeFromEnvironment } from '../../store';

const RUN_TYPES = ['fanOut', 'dag', 'fanOutFanIn', 'batch'];

interface Flags extends ConnectionFlags {
  name?: string;
  json?: boolean;
  jsonl?: boolean;
  limit?: number;
}

function formatProgress(progress: RunProgress): string {
  const states = progress.tasks.map((task) => `  ${task.state.padEnd(9)} ${task.name}${task.attempts > 1 ? ` (${task.attempts} attempts)` : ''}`);
  return [
    `${progress.done}/${progress.total} done: ok ${progress.succeeded}, failed ${progress.failed}, cancelled ${progress.cancelled}, skipped ${progress.skipped}; running ${progress.running}, pending ${progress.pending}`,
    `cost so far: ${formatCost(progress.cost)}`,
    ...formatPacing(progress.pacing),
    ...states,
  ].join('\n');
}

/** Prints a finished run as the `run` command does and sets the exit code. */
async function printResult(workflow: WorkflowHandle, flags: Flags): Promise<void> {
  // Large outputs travelled as references; read them back so the user sees every answer in full.
  const result = await resolveRunResult((await workflow.result()) as { results?: AgentResult[]; synthesis?: AgentResult; metrics?: { succeeded: number; total: number } }, storeFromEnvironment().store);
  if (!result.results || !result.metrics) {
    process.stdout.write(`${JSON.stringify(result, null, flags.json ? 2 : undefined)}\n`);
    return;
  }
  if (flags.jsonl) process.stdout.write(result.results.map((agent) => `${JSON.stringify(agent)}\n`).join(''));
  else if (flags.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else process.stdout.write(`${formatRunReport(result as Parameters<typeof formatRunReport>[0])}\n`);
  process.exitCode = result.metrics.succeeded === result.metrics.total ? ExitCode.ok : ExitCode.agentsFailed;
}

async function describeType(workflow: WorkflowHandle): Promise<{ type: string; status: string }> {
  const description = await workflow.describe();
  return { type: description.type, status: description.status.name };
}

/** Progress bar and live events until the run closes, then its result. */
export async function watchRun(workflow: WorkflowHandle, flags: Flags): Promise<void> {
  const bar = flags.json ? undefined : new SingleBar({ format: '{bar} {value}/{total} | ok {ok} failed {failed} running {running}', hideCursor: true, clearOnComplete: true }, Presets.shades_classic);
  let cursor = 0;
  let started = false;
  let closed = false;
  const outcome = workflow.result().then(
    () => undefined,
    () => undefined,
  );
  void outcome.then(() => (closed = true));
  const printEvents = async (): Promise<void> => {
    const page = await workflow.query(eventsQuery, cursor);
    cursor = page.nextCursor;
    for (const event of page.events) {
      const line = flags.json ? JSON.stringify(event) : `${new Date(event.at).toISOString().slice(11, 23)} ${event.type}${event.taskId ? ` ${event.taskId}` : ''}${event.detail ? `: ${event.detail}` : ''}`;
      if (bar && started) bar.stop();
      process.stdout.write(`${line}\n`);
      started = false;
    }
  };
  // Queries are billed actions on Temporal Cloud; a free describe says whether the run moved since the last ones.
  const gate = new QueryGate(workflow, { minIntervalMs: 2000 });
  while (!closed) {
    try {
      if (await gate.due()) {
        await printEvents();
        const progress = await workflow.query(progressQuery);
        const payload = { ok: progress.succeeded, failed: progress.failed, running: progress.running };
        if (bar && !started) {
          bar.start(progress.total, progress.done, payload);
          started = true;
        } else bar?.update(progress.done, payload);
      }
    } catch {
      // a query can miss while a workflow task is being retried; the next one answers
    }
    await Promise.race([outcome, new Promise((resolve) => setTimeout(resolve, 500))]);
  }
  if (started) bar?.stop();
  started = false;
  // The last events (the final agents, run-finished) land with the close; a closed run still answers queries.
  await printEvents().catch(() => undefined);
  const { status } = await describeType(workflow);
  if (status !== 'COMPLETED') throw new CliError(`run ${workflow.workflowId} ended ${status.toLowerCase()}`, ExitCode.agentsFailed);
  await printResult(workflow, { ...flags, json: flags.json });
}

export function runCommands(): Command[] {
  const status = withConnection(new Command('status').description('state of a run: counts and each agent\'s state').argument('<id>').option('--json', 'print JSON')).action(
    async (id: string, flags: Flags) =>
      withClient(flags, async (fanout) => {
        const workflow = fanout.client.workflow.getHandle(id);
        const { type, status: state } = await describeType(workflow);
        const progress = type === 'batch' ? await workflow.query('progress') : await workflow.query(progressQuery);
        if (flags.json) process.stdout.write(`${JSON.stringify({ id, type, status: state, progress })}\n`);
        else process.stdout.write(`${type} ${id}: ${state.toLowerCase()}\n${type === 'batch' ? JSON.stringify(progress) : formatProgress(progress as RunProgress)}\n`);
      }),
  );

  const results = withConnection(
    new Command('results').description('results of a finished run, in input order').argument('<id>').option('--json', 'print JSON').option('--jsonl', 'one JSON line per agent'),
  ).action(async (id: string, flags: Flags) =>
    withClient(flags, async (fanout) => {
      const workflow = fanout.client.workflow.getHandle(id);
      const { status: state } = await describeType(workflow);
      if (state === 'RUNNING') throw new CliError(`run ${id} is still running; \`fanout watch ${id}\` waits for it`, ExitCode.badInput);
      if (state !== 'COMPLETED') throw new CliError(`run ${id} ended ${state.toLowerCase()}: it has no results`, ExitCode.agentsFailed);
      await printResult(workflow, flags);
    }),
  );

  const cancel = withConnection(new Command('cancel').description('cancel a run: every agent it started is cancelled and stops').argument('<id>')).action(async (id: string, flags: Flags) =>
    withClient(flags, async (fanout) => {
      await fanout.client.workflow.getHandle(id).cancel();
      process.stdout.write(`cancel requested for ${id}\n`);
    }),
  );

  const watch = withConnection(new Command('watch').description('progress bar and live events of a run until it ends, then its results').argument('<id>').option('--json', 'print events and the result as JSON')).action(
    async (id: string, flags: Flags) => withClient(flags, (fanout) => watchRun(fanout.client.workflow.getHandle(id), flags)),
  );

  const list = withConnection(new Command('list').description('recent runs (fanOut, dag, fanOutFanIn, batch), newest first').option('--limit <n>', 'how many', wholeNumber(1, 1000), 20).option('--name <name>', 'only runs of this name (search attribute FanoutName)').option('--json', 'print JSON')).action(
    async (flags: Flags) =>
      withClient(flags, async (fanout) => {
        const rows: { id: string; type: string; status: string; startTime: string }[] = [];
        const types = `(${RUN_TYPES.map((type) => `WorkflowType = '${type}'`).join(' OR ')})`;
        if (flags.name !== undefined && !(await fanout.hasNameAttribute())) {
          throw new CliError('this namespace has no FanoutName search attribute; register it with `temporal operator search-attribute create --name FanoutName --type Keyword`', ExitCode.badInput);
        }
        const query = flags.name === undefined ? types : `${types} AND FanoutName = '${flags.name.replace(/'/g, "\\'")}'`;
        for await (const execution of fanout.client.workflow.list({ query, pageSize: flags.limit })) {
          rows.push({ id: execution.workflowId, type: execution.type, status: execution.status.name, startTime: execution.startTime.toISOString() });
          if (rows.length >= (flags.limit ?? 20)) break;
        }
        if (flags.json) process.stdout.write(`${JSON.stringify(rows)}\n`);
        else process.stdout.write(rows.map((row) => `${row.startTime}  ${row.status.padEnd(10)} ${row.type.padEnd(11)} ${row.id}`).join('\n') + (rows.length ? '\n' : 'no runs\n'));
      }),
  );

  const dev = new Command('dev')
    .description('start a local dev server, a worker and (without OPENAI_API_KEY) the simulator, and keep them up until Ctrl-C')
    .exitOverride()
    .action(async () => {
      const real = Boolean(process.env.OPENAI_API_KEY);
      const stack = await startLocalStack({ simulator: real ? false : {} });
      process.stdout.write(
        [
          `Temporal dev server: ${stack.server.address}   Web UI: ${stack.server.uiUrl}`,
          `worker on task queue "fanout"; agents call ${stack.providerUrl}${real ? '' : ' (SIMULATED)'}`,
          `in another shell:  export TEMPORAL_ADDRESS=${stack.server.address} TEMPORAL_UI_URL=${stack.server.uiUrl}`,
          'then: fanout run tasks.jsonl --watch    (Ctrl-C here stops everything)',
          '',
        ].join('\n'),
      );
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await stack.stop();
    });

  return [dev, status, watch, results, cancel, list];
}
