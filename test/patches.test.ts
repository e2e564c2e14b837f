import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { PATCHES, RETIRED_UNRELEASED, type Patch } from '../src/workflows/patches';

/**
 * The register of patch ids (src/workflows/patches.ts) against the code: every `patched()` and `deprecatePatch()` call
 * under src/ names a registered id at its step, one call site per patched id, one id per release. CONTRIBUTING.md,
 * "Changing workflow code".
 */
const src = path.resolve(__dirname, '..', 'src');

interface PatchCall {
  kind: 'patched' | 'deprecatePatch';
  /** The id as written; undefined when the argument is not a string literal. */
  id: string | undefined;
  /** file:line, for the message. */
  where: string;
}

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** The `patched(...)` and `deprecatePatch(...)` calls of one file's code (its comments and strings do not count). */
function patchCallsIn(name: string, text: string): PatchCall[] {
  const file = ts.createSourceFile(name, text, ts.ScriptTarget.ES2022, true);
  const calls: PatchCall[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node)) {
      const callee = ts.isPropertyAccessExpression(node.expression) ? node.expression.name : node.expression;
      if (ts.isIdentifier(callee) && (callee.text === 'patched' || callee.text === 'deprecatePatch')) {
        const [argument] = node.arguments;
        const line = file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1;
        calls.push({
          kind: callee.text,
          id: argument !== undefined && ts.isStringLiteralLike(argument) ? argument.text : undefined,
          where: `${name}:${line}`,
        });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return calls;
}

/** What is wrong between the calls and the register; empty when they agree. */
function registerProblems(
  calls: readonly PatchCall[],
  patches: readonly Patch[],
  retired: readonly string[],
): string[] {
  const problems: string[] = [];
  const byId = new Map(patches.map((patch) => [patch.id, patch]));
  const wanted = { patched: 'patched', deprecatePatch: 'deprecated' } as const;
  for (const call of calls) {
    if (call.id === undefined) {
      problems.push(
        `${call.where}: ${call.kind}() must name its id as a string literal (the register is checked by it)`,
      );
      continue;
    }
    const patch = byId.get(call.id);
    if (retired.includes(call.id)) problems.push(`${call.where}: '${call.id}' is a retired patch id; take a new one`);
    else if (patch === undefined)
      problems.push(`${call.where}: ${call.kind}('${call.id}') is not in src/workflows/patches.ts`);
    else if (patch.step !== wanted[call.kind])
      problems.push(`${call.where}: ${call.kind}('${call.id}') but the register has it at step '${patch.step}'`);
  }
  for (const patch of patches) {
    const own = calls.filter((call) => call.id === patch.id);
    if (patch.step === 'removed' && own.length > 0)
      problems.push(`'${patch.id}' is registered as removed but is still called (${own[0].where})`);
    if (patch.step !== 'removed' && own.length === 0)
      problems.push(
        `'${patch.id}' is registered at step '${patch.step}' but no code calls it: move it on to 'removed'`,
      );
    if (!/^[a-z0-9]+(-[a-z0-9]+)*$/.test(patch.id)) problems.push(`'${patch.id}' is not kebab-case`);
    if (!/^\d+\.\d+\.\d+$/.test(patch.release))
      problems.push(`'${patch.id}': release '${patch.release}' is no version`);
    if (retired.includes(patch.id)) problems.push(`'${patch.id}' is a retired patch id; take a new one`);
  }
  for (const [index, patch] of patches.entries()) {
    const earlier = patches.slice(0, index);
    if (earlier.some((other) => other.id === patch.id)) problems.push(`'${patch.id}' is registered twice`);
    const sharing = earlier.find((other) => other.release === patch.release);
    if (sharing)
      problems.push(
        `'${sharing.id}' and '${patch.id}' share release ${patch.release}: one patch id per release gates all its changes`,
      );
  }
  const patchedCalls = calls.filter((call) => call.kind === 'patched').length;
  const patchedIds = patches.filter((patch) => patch.step === 'patched').length;
  if (patchedCalls > patchedIds)
    problems.push(
      `${patchedCalls} patched() calls for ${patchedIds} registered patched ids: ask each once (a function of the ` +
        'workflow that calls patched(), as its branches need it)',
    );
  return problems;
}

const calls = sourceFiles(src).flatMap((file) => patchCallsIn(path.relative(src, file), readFileSync(file, 'utf8')));

describe('the register of patch ids', () => {
  it('holds every patched() and deprecatePatch() call in src/ at its step, one id per release', () => {
    expect(registerProblems(calls, PATCHES, RETIRED_UNRELEASED)).toEqual([]);
  });

  it('finds a call that is not registered, one at the wrong step, and a retired id', () => {
    const code = [
      "import { deprecatePatch, patched } from '@temporalio/workflow';",
      '// patched() in a comment is not a call',
      "if (patched('window-retry-order')) upsertMemo({});",
      "deprecatePatch('batch-page-size');",
      "if (workflow.patched('stripe-lending')) lend();",
      'if (patched(SOME_PATCH)) lend();',
    ].join('\n');
    const found = patchCallsIn('example.ts', code);
    expect(found.map((call) => [call.kind, call.id])).toEqual([
      ['patched', 'window-retry-order'],
      ['deprecatePatch', 'batch-page-size'],
      ['patched', 'stripe-lending'],
      ['patched', undefined],
    ]);
    const register: Patch[] = [{ id: 'batch-page-size', change: 'pages of 500', release: '0.3.0', step: 'patched' }];
    expect(registerProblems(found, register, RETIRED_UNRELEASED)).toEqual([
      "example.ts:3: patched('window-retry-order') is not in src/workflows/patches.ts",
      "example.ts:4: deprecatePatch('batch-page-size') but the register has it at step 'patched'",
      "example.ts:5: 'stripe-lending' is a retired patch id; take a new one",
      'example.ts:6: patched() must name its id as a string literal (the register is checked by it)',
      '3 patched() calls for 1 registered patched ids: ask each once (a function of the workflow that calls ' +
        'patched(), as its branches need it)',
    ]);
  });

  it('refuses two ids in one release', () => {
    const register: Patch[] = [
      { id: 'window-retry-order', change: 'retries first', release: '0.3.0', step: 'patched' },
      { id: 'batch-page-size', change: 'pages of 500', release: '0.3.0', step: 'patched' },
    ];
    const found = register.map((patch): PatchCall => ({ kind: 'patched', id: patch.id, where: 'example.ts:1' }));
    expect(registerProblems(found, register, [])).toEqual([
      "'window-retry-order' and 'batch-page-size' share release 0.3.0: one patch id per release gates all its changes",
    ]);
  });
});
