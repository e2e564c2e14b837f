import { Command } from 'commander';
import { CliError, ExitCode } from '../errors';
import { clientCommand, onRun, type ConnectionFlags } from '../options';
import { printRunResult } from '../run-result';
import { withTranscripts } from '../agent-view';
import { storeFromEnvironment } from '../../store';

interface ResultsFlags extends ConnectionFlags {
  json?: boolean;
  jsonl?: boolean;
}

/** `fanout results <id>`: a finished run's results, in input order. */
export function resultsCommand(): Command {
  return clientCommand(
    onRun('results', 'results of a finished run, in input order').option('--jsonl', 'one JSON line per agent'),
    async (fanout, id, flags: ResultsFlags) => {
      const handle = fanout.getHandle(id);
      const { status } = await handle.describe();
      if (status === 'RUNNING')
        throw new CliError(`run ${id} is still running; \`fanout watch ${id}\` waits for it`, ExitCode.badInput);
      if (status !== 'COMPLETED')
        throw new CliError(`run ${id} ended ${status.toLowerCase()}: it has no results`, ExitCode.agentsFailed);
      // With --json, each agent's steps (its transcript, read back from the store) come with its result.
      await printRunResult(
        handle,
        flags,
        flags.json
          ? handle.result().then((value) => withTranscripts(value as object, storeFromEnvironment().store))
          : undefined,
      );
    },
  );
}
