/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  setupFiles: ['<rootDir>/test/support/quiet-logs.ts'],
  // The slowest files first (test/support/timings.json, `npm run test:timings`), so no long file starts last.
  testSequencer: '<rootDir>/test/support/test-sequencer.js',
  // Five files at a time on the 2-core machines: a file keeps about 0.4 of a core busy on average (the rest is waiting on
  // calls, timers and crash detection). Whole suites here, one after another on an idle machine (2026-12-07): four at a
  // time 470-485 s of jest, five 402 s (the machine 79% busy on average), six 376 s (busier still, for 6% more); five
  // leaves a slower machine room. Each jest worker has a dev server of its own (global-setup.ts).
  maxWorkers: 5,
  testTimeout: 120_000,
  // Transpile only: `npm run lint` type-checks test/ with the rest (tsc --noEmit), so ts-jest need not do it again.
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: { isolatedModules: true } }] },
};
