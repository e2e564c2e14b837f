import type { DagNode } from './dag';
import type { InputIssue } from './input-issue';

/** Unknown dependencies, each naming the node and the missing id. */
export function unknownDependencyIssues(nodes: readonly DagNode[]): InputIssue[] {
  const ids = new Set(nodes.map((node) => node.id));
  const issues: InputIssue[] = [];
  nodes.forEach((node, index) =>
    (node.dependsOn ?? []).forEach((dependency, position) => {
      if (!ids.has(dependency))
        issues.push({ path: `nodes[${index}].dependsOn[${position}]`, message: `unknown node "${dependency}"` });
    }),
  );
  return issues;
}

/** The first cycle found, as its path (`a -> b -> c -> a`), or undefined. Assumes every dependency exists. */
export function findCycle(nodes: readonly Pick<DagNode, 'id' | 'dependsOn'>[]): string[] | undefined {
  const dependencies = new Map(nodes.map((node) => [node.id, node.dependsOn ?? []]));
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (id: string): string[] | undefined => {
    if (state.get(id) === 'done') return undefined;
    if (state.get(id) === 'visiting') return [...stack.slice(stack.indexOf(id)), id];
    state.set(id, 'visiting');
    stack.push(id);
    for (const dependency of dependencies.get(id) ?? []) {
      const cycle = visit(dependency);
      if (cycle) return cycle;
    }
    stack.pop();
    state.set(id, 'done');
    return undefined;
  };
  for (const node of nodes) {
    const cycle = visit(node.id);
    // Reported in the direction work flows (a dependency before its dependant).
    if (cycle) return cycle.reverse();
  }
  return undefined;
}

/**
 * The graph's topological levels: level 0 has no dependencies, level k depends only on earlier levels. Nodes within a
 * level keep their input order. These are for inspection: the `dag` workflow starts each node as soon as its own
 * dependencies finish, not level by level.
 *
 * @example parallelGroups([{ id: 'r', prompt }, { id: 'a', prompt, dependsOn: ['r'] }]) // [['r'], ['a']]
 */
export function parallelGroups(nodes: readonly DagNode[]): string[][] {
  const level = new Map<string, number>();
  const byId = new Map(nodes.map((node) => [node.id, node]));
  const depth = (id: string, seen: Set<string>): number => {
    const known = level.get(id);
    if (known !== undefined) return known;
    if (seen.has(id)) throw new Error(`cycle through "${id}"`);
    seen.add(id);
    const dependencies = byId.get(id)?.dependsOn ?? [];
    const value =
      dependencies.length === 0 ? 0 : 1 + Math.max(...dependencies.map((dependency) => depth(dependency, seen)));
    level.set(id, value);
    return value;
  };
  const groups: string[][] = [];
  for (const node of nodes) {
    const value = depth(node.id, new Set());
    (groups[value] ??= []).push(node.id);
  }
  return groups;
}

/** The longest chain of `durations` along dependencies, ending anywhere. */
export function criticalPath(
  nodes: readonly DagNode[],
  durations: ReadonlyMap<string, number>,
): { path: string[]; lengthMs: number } {
  const best = new Map<string, { lengthMs: number; path: string[] }>();
  const byId = new Map(nodes.map((node) => [node.id, node]));
  const longest = (id: string): { lengthMs: number; path: string[] } => {
    const known = best.get(id);
    if (known) return known;
    const own = durations.get(id) ?? 0;
    let before = { lengthMs: 0, path: [] as string[] };
    for (const dependency of byId.get(id)?.dependsOn ?? []) {
      const candidate = longest(dependency);
      if (candidate.lengthMs > before.lengthMs) before = candidate;
    }
    const value = { lengthMs: before.lengthMs + own, path: [...before.path, id] };
    best.set(id, value);
    return value;
  };
  let result = { lengthMs: 0, path: [] as string[] };
  for (const node of nodes) {
    const candidate = longest(node.id);
    if (candidate.lengthMs > result.lengthMs) result = candidate;
  }
  return result;
}
