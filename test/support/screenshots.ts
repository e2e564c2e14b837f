import { mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './paths';

/**
 * Where a test saves `name`, a screenshot that docs/ shows. By default a folder under the system's temporary
 * directory, so testing leaves the checkout clean; with REFRESH_DOCS_SCREENSHOTS=1 the copy in docs/ itself
 * (CONTRIBUTING.md, "Screenshots").
 */
export function screenshotPath(name: string): string {
  if (process.env.REFRESH_DOCS_SCREENSHOTS === '1') return path.join(ROOT, 'docs', name);
  // One folder per user: another user's folder of the same name would not be writable. Under the system's temporary
  // directory, not the run's (global-setup.ts), which is removed when the run ends.
  const temporary = process.env.FANOUT_TEST_SYSTEM_TMPDIR ?? os.tmpdir();
  const directory = path.join(temporary, `temporal-fanout-screenshots-${os.userInfo().username}`);
  mkdirSync(directory, { recursive: true });
  return path.join(directory, name);
}
