import { execFileSync } from 'node:child_process';
import path from 'node:path';
import type { Config } from '@jest/types';
import { ensureDistBuilt } from './dist-build';
import { createRunDirectory } from './run-directory';
import { SHARED_DEV_SERVERS, startSharedDevServers } from './shared-dev-server';
import { suiteRun } from './suite-run';

/**
 * Once per run, before any test file: dist/ for the worker and CLI processes the tests spawn, and the workflow bundle
 * every in-process worker loads (bundling per worker would cost seconds each), rebuilt only when the sources changed;
 * the Temporal CLI; a directory for everything the run writes (temporary files, the payload store), removed after it;
 * and a dev server per jest worker, which the test files that need no server of their own share.
 */
export default async function globalSetup(globalConfig: Config.GlobalConfig): Promise<void> {
  const root = path.resolve(__dirname, '..', '..');
  // The Temporal CLI is found or built once here, not inside a test's timeout.
  process.env.TEMPORAL_CLI = execFileSync('bash', [path.join(root, 'scripts', 'ensure-temporal.sh')], {
    encoding: 'utf8',
  }).trim();
  const directory = createRunDirectory();
  // From here on every process of the run (jest's workers, the servers, the workers and CLIs the tests spawn) writes
  // its temporary files and its payload store into the run's directory, not /tmp or ~/.local/share.
  Object.assign(process.env, directory.environment);
  // The servers start while dist/ is built.
  const servers = startSharedDevServers(Math.max(1, globalConfig.maxWorkers));
  suiteRun.set({ directory, servers });
  try {
    await ensureDistBuilt(root);
    process.env.FANOUT_WORKFLOW_BUNDLE = path.join(root, 'dist', 'workflow-bundle.js');
    process.env[SHARED_DEV_SERVERS] = JSON.stringify(await servers.ready);
  } catch (error) {
    await suiteRun.end();
    throw error;
  }
}
