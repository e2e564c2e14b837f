import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { findCycle } from '../src/contract/graph';

/**
 * The folders of src/ by floor, the ground first. A folder imports only from folders on floors below its own, so no
 * import runs upward and none makes a circle between folders. Two take less than their floor allows: the contract
 * (the lowest layer, shared by workflows and activities) imports nothing, and workflow code (Temporal's sandbox)
 * imports only the contract.
 */
const FLOORS: readonly (readonly string[])[] = [
  ['contract', 'config'],
  ['telemetry'],
  ['workflows', 'store', 'pacing', 'pricing', 'watchdog', 'codec', 'tools', 'worker-health'],
  ['answer-cache'],
  ['llm', 'spool'],
  ['metrics', 'provider-batch', 'sim'],
  ['activities'],
  ['worker', 'client'],
  ['local'],
  ['cli', 'index'],
];

const ONLY: Readonly<Record<string, readonly string[]>> = {
  contract: [],
  workflows: ['contract'],
};

const src = path.resolve(__dirname, '..', 'src');

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** src/llm/send-chat.ts -> llm; src/worker.ts -> worker. */
function folderOf(file: string): string {
  return path.relative(src, file).split(path.sep)[0].replace(/\.ts$/, '');
}

function floorOf(folder: string): number {
  const floor = FLOORS.findIndex((names) => names.includes(folder));
  if (floor < 0) throw new Error(`src/${folder} is on no floor of test/layers.test.ts: add it where it belongs`);
  return floor;
}

/** What `file` imports by a relative path (`import`, `export ... from`, `import()`, type-only imports too). */
function relativeImports(file: string): string[] {
  return [...readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']*)'/g)].map(
    ([, specifier]) => specifier,
  );
}

/** Every relative import of every file under src/, as the folders it joins. */
function imports(): { file: string; from: string; to: string; specifier: string }[] {
  return sourceFiles(src).flatMap((file) =>
    relativeImports(file).map((specifier) => ({
      file: path.relative(src, file),
      from: folderOf(file),
      to: folderOf(path.resolve(path.dirname(file), specifier)),
      specifier,
    })),
  );
}

/** The file a relative import names: `./x` is x.ts or x/index.ts. */
function resolved(file: string, specifier: string): string {
  const base = path.resolve(path.dirname(file), specifier);
  return [`${base}.ts`, path.join(base, 'index.ts')].find((candidate) => existsSync(candidate)) ?? base;
}

/** One circle of `graph` (each file to the files it imports), as the files around it, or undefined where there is none. */
function findCircle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  // The DAG's own cycle finder: a file is a node, the files it imports its dependencies.
  return findCycle([...graph].map(([id, dependsOn]) => ({ id, dependsOn: [...dependsOn] })));
}

/** Every file under src/ to the files of src/ it imports (type-only imports too: they tie the files as much). */
function fileGraph(): Map<string, string[]> {
  return new Map(
    sourceFiles(src).map((file) => [
      path.relative(src, file),
      relativeImports(file).map((specifier) => path.relative(src, resolved(file, specifier))),
    ]),
  );
}

describe('the layers of src/', () => {
  it('places every folder on a floor', () => {
    const folders = new Set(sourceFiles(src).map(folderOf));
    for (const folder of folders) expect(() => floorOf(folder)).not.toThrow();
  });

  it('has no import that runs upward or sideways between folders', () => {
    const wrong = imports()
      .filter(({ from, to }) => from !== to)
      .filter(({ from, to }) => (ONLY[from] ? !ONLY[from].includes(to) : floorOf(to) >= floorOf(from)))
      .map(({ file, specifier }) => `src/${file} imports '${specifier}'`);
    expect(wrong).toEqual([]);
  });

  it('sees an upward import when there is one', () => {
    // The judge itself: a workflow importing an activity, and the contract importing anything above it, are refused.
    const refused = (from: string, to: string) =>
      ONLY[from] ? !ONLY[from].includes(to) : floorOf(to) >= floorOf(from);
    expect(refused('workflows', 'activities')).toBe(true);
    expect(refused('workflows', 'llm')).toBe(true);
    expect(refused('contract', 'spool')).toBe(true);
    expect(refused('llm', 'activities')).toBe(true);
    expect(refused('activities', 'llm')).toBe(false);
  });

  it('has no import circle between files, within a folder either', () => {
    expect(findCircle(fileGraph())).toBeUndefined();
  });

  it('sees a circle when there is one', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['b.ts']],
      ['d.ts', []],
    ]);
    expect(findCircle(graph)).toEqual(['b.ts', 'c.ts', 'b.ts']);
    expect(
      findCircle(
        new Map([
          ['a.ts', ['b.ts']],
          ['b.ts', []],
        ]),
      ),
    ).toBeUndefined();
  });
});
