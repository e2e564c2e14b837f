// Bundles the compiled workflows once at build time, so workers start in about a second instead of
// bundling on every start (workers pick up dist/workflow-bundle.js by themselves).
const { writeFileSync } = require('node:fs');
const path = require('node:path');
const { bundleWorkflowCode } = require('@temporalio/worker');

async function main() {
  const dist = path.resolve(__dirname, '..', 'dist');
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve(path.join(dist, 'workflows')),
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error },
  });
  writeFileSync(path.join(dist, 'workflow-bundle.js'), code);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
