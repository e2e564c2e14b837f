/**
 * What one call into a workflow sandbox costs with and without a timeout: the SDK runs every call into its V8 context
 * (activate, tryUnblockConditions, concludeActivation ...) with `timeout` set to its isolate execution timeout (5 s, not
 * a worker option), for which Node starts a watchdog thread per call. A trivial script in a context like the SDK's,
 * alternated; CPU of this process per call.
 *
 *   tsx bench/vm-call-cost.ts [--calls 20000]
 */
import vm from 'node:vm';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '20000' } } });
const calls = Number(values.calls);
const context = vm.createContext({}, { microtaskMode: 'afterEvaluate' });
const script = new vm.Script('1 + 1');
for (const [label, options] of [
  ['no timeout', {}],
  ['timeout 5 s', { timeout: 5000 }],
  ['no timeout', {}],
  ['timeout 5 s', { timeout: 5000 }],
] as const) {
  const before = process.cpuUsage();
  const startedAt = performance.now();
  for (let call = 0; call < calls; call += 1) script.runInContext(context, options);
  const cpu = process.cpuUsage(before);
  console.log(
    `${label}: ${(((performance.now() - startedAt) * 1000) / calls).toFixed(1)} µs wall, ${((cpu.user + cpu.system) / calls).toFixed(1)} µs CPU per call`,
  );
}
