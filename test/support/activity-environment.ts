import type { Info } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { Runtime } from '@temporalio/worker';

/**
 * A MockActivityEnvironment that logs through the tests' runtime logger (test/support/quiet-logs.ts): its own default
 * logs at INFO, and printed a block for every activity failure the tests expect.
 */
export function activityEnvironment(info?: Partial<Info>): MockActivityEnvironment {
  return new MockActivityEnvironment(info, { logger: Runtime.instance().logger });
}
