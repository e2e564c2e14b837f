import type { JaegerSpan, JaegerTrace } from '../local/jaeger';

/** The attributes a line of the tree shows, as `label=value`, when the span has them. */
const SHOWN: readonly [key: string, label: string][] = [
  ['fanout.task_id', 'task'],
  ['gen_ai.usage.input_tokens', 'in'],
  ['gen_ai.usage.output_tokens', 'out'],
  ['gen_ai.usage.cache_read.input_tokens', 'cached'],
  ['fanout.cost_usd', '$'],
  ['fanout.attempt', 'attempt'],
  ['fanout.approval.outcome', 'approval'],
  ['fanout.provider_batch.outcome', 'batch'],
  ['error.type', 'error'],
];

function tagOf(span: JaegerSpan, key: string): unknown {
  return span.tags.find((tag) => tag.key === key)?.value;
}

function milliseconds(microseconds: number): string {
  const ms = microseconds / 1000;
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

/**
 * A trace as an indented tree, one span a line in the order they started: its name, how long it took, and the figures
 * a reader looks for (tokens, cost, attempt, errors), as `fanout demo --trace` prints it.
 *
 * @example
 * formatTraceTree(trace)
 * // fanout demo  2.61 s
 * //   StartWorkflow:fanOut  12 ms
 * //     RunWorkflow:fanOut  2.55 s
 * //       ...
 * //             chat gpt-4o-mini  2.40 s  in=21 out=34 $=0.000024 attempt=1
 */
export function formatTraceTree(trace: JaegerTrace): string {
  const ids = new Set(trace.spans.map((span) => span.spanID));
  const children = new Map<string | undefined, JaegerSpan[]>();
  for (const span of trace.spans) {
    const parent = span.references.find((reference) => reference.refType === 'CHILD_OF')?.spanID;
    const key = parent !== undefined && ids.has(parent) ? parent : undefined;
    children.set(key, [...(children.get(key) ?? []), span]);
  }
  const lines: string[] = [];
  const visit = (span: JaegerSpan, depth: number) => {
    const figures = SHOWN.flatMap(([key, label]) => {
      const value = tagOf(span, key);
      // No cached tokens is said by their absence (a provider reports 0 on every call it served from no cache).
      if (value === undefined || (label === 'cached' && value === 0)) return [];
      return [`${label}=${String(value)}`];
    });
    lines.push(
      `${'  '.repeat(depth)}${span.operationName}  ${milliseconds(span.duration)}${figures.length > 0 ? `  ${figures.join(' ')}` : ''}`,
    );
    for (const child of (children.get(span.spanID) ?? []).sort((a, b) => a.startTime - b.startTime))
      visit(child, depth + 1);
  };
  for (const root of (children.get(undefined) ?? []).sort((a, b) => a.startTime - b.startTime)) visit(root, 0);
  return lines.join('\n');
}
