/**
 * The baseline's worker, one process: `node worker.js --address HOST:PORT --task-queue Q --bundle FILE [--slots N]`,
 * with OPENAI_BASE_URL / OPENAI_API_KEY from the environment. Slots default to the SDK's own 100; everything else is
 * the SDK's default too. The workflow bundle is built once by `bundlePlainWorkflows` and loaded from a file, as a
 * production worker would load a prebuilt bundle.
 */
import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import { createJournaledAgentActivities, createPlainActivities, createPlainAgentActivities } from './activities';

/** Bundles bench/plain/workflows.ts with the SDK's bundler into `outputFile`. */
export async function bundlePlainWorkflows(outputFile: string): Promise<void> {
  const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('./workflows') });
  await writeFile(outputFile, code);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      address: { type: 'string', default: '127.0.0.1:7233' },
      'task-queue': { type: 'string', default: 'plain' },
      bundle: { type: 'string' },
      slots: { type: 'string', default: '100' },
    },
  });
  if (values.bundle === undefined) throw new Error('--bundle <file> is required (see bundlePlainWorkflows)');
  const slots = Number(values.slots);
  if (!Number.isInteger(slots) || slots < 1)
    throw new Error(`--slots must be a whole number of at least 1, got "${values.slots}"`);
  const connection = await NativeConnection.connect({ address: values.address });
  const openai = new OpenAI({
    baseURL: process.env.OPENAI_BASE_URL,
    apiKey: process.env.OPENAI_API_KEY ?? 'unused',
    maxRetries: 0,
  });
  const worker = await Worker.create({
    connection,
    taskQueue: values['task-queue'],
    workflowBundle: { codePath: values.bundle },
    activities: {
      ...createPlainActivities(openai),
      ...createPlainAgentActivities(openai),
      // The design probe's journals (compare.ts sets the directory; the activity refuses to run without one).
      ...createJournaledAgentActivities(openai, process.env.PLAIN_JOURNAL_DIR),
    },
    maxConcurrentActivityTaskExecutions: slots,
  });
  process.stderr.write(`plain worker polling "${values['task-queue']}" with ${slots} activity slots\n`);
  // The SDK shuts the worker down on SIGINT/SIGTERM by itself; run() resolves once it has drained.
  await worker.run();
  await connection.close();
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
