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
  // Two files at a time fit the 2-core machines; each jest worker has a dev server of its own (global-setup.ts).
  maxWorkers: 2,
  testTimeout: 120_000,
  // Transpile only: `npm run lint` type-checks test/ with the rest (tsc --noEmit), so ts-jest need not do it again.
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: { isolatedModules: true } }] },
};
