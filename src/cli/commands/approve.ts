import { Command } from 'commander';
import type { RunProgress } from '../../contract/fan-out';
import { approveUpdate } from '../../workflows/agent/messages';
import { runningAgents } from '../agent-view';
import { CliError, describeError, ExitCode } from '../errors';
import { withClient, withConnection, type ConnectionFlags } from '../options';

interface ApproveFlags extends ConnectionFlags {
  deny?: string;
}

/**
 * `fanout approve <run> <call> [--deny "why"]`: answers a tool call that waits for a person. `<run>` is the id of the
 * agent that waits (as `fanout status` prints it) or of anything above it: the run, or an agent whose sub-agent waits.
 * The call is looked for in every running agent below `<run>`, sub-agents included; call ids are the provider's, unique
 * in practice, and when several agents do wait on the same one the command refuses and names them.
 */
export function approveCommand(): Command {
  return withConnection(
    new Command('approve')
      .description('approve (or --deny) a tool call an agent waits on; `fanout status <run>` lists them')
      .argument('<run>', "the waiting agent's workflow id, or its run's (a batch's too), or a parent agent's")
      .argument('<call>', 'the call id')
      .option('--deny <why>', 'deny the call; the model reads why'),
  ).action(async (run: string, callId: string, flags: ApproveFlags) =>
    withClient(flags, async (fanout) => {
      const client = fanout.client;
      const description = await client.workflow.getHandle(run).describe();
      const isAgent = description.type === 'agent';
      const isBatch = description.type === 'batch';
      const progress =
        isAgent || isBatch ? undefined : ((await client.workflow.getHandle(run).query('progress')) as RunProgress);
      const batchAgents = isBatch ? (await fanout.getBatch(run).progress()).runningAgents : undefined;
      const waiting = (
        await runningAgents(client.workflow, {
          workflowId: run,
          type: description.type,
          ...(progress ? { progress } : {}),
          ...(batchAgents ? { batchAgents } : {}),
        })
      ).filter((agent) => agent.progress.waiting.some((call) => call.callId === callId));
      if (waiting.length > 1) {
        throw new CliError(
          `call ${callId} waits in ${waiting.length} agents; name one: ${waiting.map((agent) => agent.workflowId).join(', ')}`,
          ExitCode.badInput,
        );
      }
      // An agent named directly answers for itself when nothing below it waits: the update's refusal names what does.
      if (waiting.length === 0 && !isAgent)
        throw new CliError(
          `no agent of run ${run} waits on call ${callId}; \`fanout status ${run}\` lists the calls that wait`,
          ExitCode.badInput,
        );
      const target = waiting[0]?.workflowId ?? run;
      const decision = {
        callId,
        approve: flags.deny === undefined,
        ...(flags.deny === undefined ? {} : { reason: flags.deny }),
      };
      try {
        await client.workflow.getHandle(target).executeUpdate(approveUpdate, { args: [decision] });
      } catch (error) {
        throw new CliError(describeError(error), ExitCode.badInput);
      }
      process.stdout.write(`${flags.deny === undefined ? 'approved' : 'denied'} ${callId} of ${target}\n`);
    }),
  );
}
