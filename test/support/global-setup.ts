import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { ensureDistBuilt } from './dist-build';

/**
 * Builds once per suite: dist/ for the worker and CLI processes the tests spawn, and the workflow bundle every
 * in-process worker loads (bundling per worker would cost seconds each), only when the sources changed since.
 */
export default async function globalSetup(): Promise<void> {
  const root = path.resolve(__dirname, '..', '..');
  await ensureDistBuilt(root);
  process.env.FANOUT_WORKFLOW_BUNDLE = path.join(root, 'dist', 'workflow-bundle.js');
  // The Temporal CLI is found or built once here, not inside a test's timeout.
  process.env.TEMPORAL_CLI = execFileSync('bash', [path.join(root, 'scripts', 'ensure-temporal.sh')], {
    encoding: 'utf8',
  }).trim();
}
