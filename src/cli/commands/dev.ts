import { Command } from 'commander';
import { startLocalStack } from '../../local/local-stack';

/** `fanout dev`: a local dev server, a worker and (without a key) the simulator, up until Ctrl-C. */
export function devCommand(): Command {
  return new Command('dev')
    .description(
      'start a local dev server, a worker and (without OPENAI_API_KEY) the simulator, and keep them up until Ctrl-C',
    )
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
}
