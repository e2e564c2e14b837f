import { DefaultLogger, Runtime } from '@temporalio/worker';

// Worker state changes are logged at INFO; tests show errors only (an expected agent failure is a warning) (FANOUT_LOG_LEVEL to change).
const level = (process.env.FANOUT_LOG_LEVEL ?? 'ERROR').toUpperCase() as 'TRACE' | 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
try {
  Runtime.install({ logger: new DefaultLogger(level) });
} catch {
  // Installed already by an earlier test file in this jest worker process.
}
