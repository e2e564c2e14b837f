import { suiteRun } from './suite-run';

/** After the last test file: stops the dev servers and removes everything the run wrote (global-setup.ts). */
export default async function globalTeardown(): Promise<void> {
  await suiteRun.end();
}
