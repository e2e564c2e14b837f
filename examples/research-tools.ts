/**
 * The tools of examples/research.ts, as any worker would register them (`fanout worker --tools <module>`, or the
 * `tools` worker option): a search over a small built-in corpus, and a publish step a person must approve.
 */
import { z } from 'zod';
import { defineTool } from '../src/tools/define-tool';

const CORPUS: Record<string, string> = {
  durable:
    'Temporal persists every step of a workflow; a worker that dies mid-run is replaced and the run resumes where it was.',
  history:
    'A workflow history holds every event; past 50 MB or 51,200 events the server terminates the run, so long loops continue as new.',
  agents:
    'Agent loops alternate model calls and tool calls; each is an activity, retried on its own, so no finished call is paid for twice.',
  cost: 'Temporal Cloud bills about $50 per million actions: each activity start, signal, update and timer.',
};

export const webSearch = defineTool({
  name: 'web_search',
  description: 'Searches a small corpus about durable execution and returns the matching notes.',
  input: z.object({ query: z.string().describe('what to look for') }),
  run: ({ query }) => {
    const words = query.toLowerCase().split(/\W+/);
    const hits = Object.entries(CORPUS).filter(([topic]) => words.some((word) => word.startsWith(topic.slice(0, 5))));
    return hits.length > 0
      ? hits.map(([, note]) => note).join('\n')
      : 'no notes match; try durable, history, agents or cost';
  },
});

export const publishReport = defineTool({
  name: 'publish_report',
  description: 'Publishes the report. A person approves each call.',
  input: z.object({ title: z.string(), summary: z.string() }),
  needsApproval: { timeoutMs: 10 * 60_000 },
  run: ({ title }) => `published "${title}"`,
});
