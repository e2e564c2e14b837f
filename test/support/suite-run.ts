import type { RunDirectory } from './run-directory';
import type { SharedDevServers } from './shared-dev-server';

/** What global-setup.ts starts for the run and global-teardown.ts ends. */
interface SuiteRun {
  directory: RunDirectory;
  servers: SharedDevServers;
}

// Jest loads the setup and the teardown modules apart; a global of this process is what the two share.
const holder = globalThis as { fanoutSuiteRun?: SuiteRun };

export const suiteRun = {
  set(run: SuiteRun): void {
    holder.fanoutSuiteRun = run;
  },
  /** Stops the servers, then removes the run's directory. */
  async end(): Promise<void> {
    const run = holder.fanoutSuiteRun;
    holder.fanoutSuiteRun = undefined;
    if (!run) return;
    try {
      await run.servers.stop();
    } finally {
      run.directory.remove();
    }
  },
};
