import { DefaultLogger, Runtime } from '@temporalio/worker';
import { logLevelFromEnvironment } from '../../src/config/environment';

// Tests show errors only (FANOUT_LOG_LEVEL to change): the SDK logs worker state changes at INFO, an expected agent
// failure is a warning, and the SDK's core warns of every completion the server had already settled ("Task not found
// when completing": a call the test cancelled, or the watchdog failed for a lost worker). The core writes its own lines
// to stderr, so its filter is set here; its lines are not forwarded to the logger.
const level = logLevelFromEnvironment('ERROR');
try {
  Runtime.install({
    logger: new DefaultLogger(level),
    telemetryOptions: { logging: { filter: { core: level, other: 'ERROR' } } },
  });
} catch {
  // Installed already by an earlier test file in this jest worker process.
}
