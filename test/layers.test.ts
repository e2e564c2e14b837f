import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

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

/** Every relative import of every file under src/, as the folders it joins. */
function imports(): { file: string; from: string; to: string; specifier: string }[] {
  return sourceFiles(src).flatMap((file) =>
    [...readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']*)'/g)].map(([, specifier]) => ({
      file: path.relative(src, file),
      from: folderOf(file),
      to: folderOf(path.resolve(path.dirname(file), specifier)),
      specifier,
    })),
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
});
