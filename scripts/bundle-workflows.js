// Bundles the compiled workflows once at build time, so workers start in about a second instead of
// bundling on every start (workers pick up dist/workflow-bundle.js by themselves). A second bundle,
// dist/workflow-bundle-traced.js, holds the same workflows with the OpenTelemetry workflow interceptors
// (src/telemetry/workflow-interceptors.ts): a worker loads it only when tracing is on, so workflows pay nothing for
// tracing otherwise. An argument names another build directory than dist/ (the tests build into a staging directory
// first: test/support/dist-build.ts).
const { writeFileSync } = require('node:fs');
const path = require('node:path');
const { bundleWorkflowCode } = require('@temporalio/worker');

async function bundle(dist, workflowInterceptorModules) {
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve(path.join(dist, 'workflows')),
    workflowInterceptorModules,
    // The SDK needs an inline source map (it maps workflow stack traces with it), but not the sources inside it: every
    // workflow thread holds the map and its parsed form, and the 1.7 MB of zod, SDK and project sources in it made an
    // idle worker about 30 MB larger. Stack traces still name the original file, line and column.
    // Module ids relative to the build directory, so that a build staged elsewhere (the tests') bundles the same code.
    webpackConfigHook: (config) => ({ ...config, context: dist, devtool: 'inline-nosources-source-map' }),
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error },
  });
  return oneBytePerCharacter(code);
}

/**
 * The bundle with every character above U+00FF written as a \u escape. A worker keeps the bundle's code as a string in
 * its own thread and in each workflow thread, and one such character anywhere (an arrow in a message, an em dash in a
 * comment, zod's locales) makes V8 store the whole string at two bytes a character: 5.2 MB instead of 2.7 per thread.
 * An escape means the same character in a string, template or regular expression literal (no tagged template in the
 * bundle reads its raw text); elsewhere they are in comments. Lines keep their numbers, so the source map still holds.
 */
function oneBytePerCharacter(code) {
  return code.replace(/[^\x00-\xff]/g, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

async function main() {
  const dist = path.resolve(process.argv[2] ?? path.join(__dirname, '..', 'dist'));
  // Every bundle tells the worker's watchdog about its calls (src/workflows/call-notices.ts).
  const notices = require.resolve(path.join(dist, 'workflows', 'call-notices'));
  writeFileSync(path.join(dist, 'workflow-bundle.js'), await bundle(dist, [notices]));
  const traced = require.resolve(path.join(dist, 'telemetry', 'workflow-interceptors'));
  writeFileSync(path.join(dist, 'workflow-bundle-traced.js'), await bundle(dist, [notices, traced]));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
