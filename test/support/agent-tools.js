// Tools for the agent tests, loaded by `fanout worker --tools test/support/agent-tools.js` (a worker process) and by
// in-process workers alike. Each call is also a request to the simulator (FANOUT_TEST_SIM_URL), with the header
// x-fanout-task-id `tool:<name>:<call id>`, so a test counts tool calls, and sees them aborted, where it counts model calls.
const { z } = require('zod');
const { defineTool } = require('../../dist/index.js');

async function simulatedWork(name, text, latencyMs, context) {
  const base = process.env.FANOUT_TEST_SIM_URL;
  if (!base) return `${name}: ${text}`;
  const response = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    signal: context.signal,
    headers: {
      'content-type': 'application/json',
      'x-fanout-task-id': `tool:${name}:${context.callId}`,
      'x-fanout-workflow-id': context.workflowId,
    },
    body: JSON.stringify({
      model: 'tool',
      messages: [{ role: 'user', content: `${text} [sim latency=${latencyMs}]` }],
    }),
  });
  if (!response.ok) throw new Error(`${name} failed with HTTP ${response.status}`);
  return `${name} found: ${text}`;
}

const search = defineTool({
  name: 'search',
  description: 'Searches for a query',
  input: z.object({ q: z.string(), ms: z.number().int().min(0).optional() }),
  run: ({ q, ms }, context) => simulatedWork('search', q, ms ?? 20, context),
});

const fetchPage = defineTool({
  name: 'fetch_page',
  description: 'Reads a page',
  input: z.object({ url: z.string() }),
  run: ({ url }, context) => simulatedWork('fetch_page', url, 20, context),
});

// Does not listen for the abort: cancelled, it answers anyway (a tool a cancel cannot stop, whose answer must be kept).
const stubborn = defineTool({
  name: 'stubborn',
  description: 'Works on, whatever happens',
  input: z.object({ ms: z.number().int().min(0) }),
  run: ({ ms }, context) => simulatedWork('stubborn', 'done', ms, { ...context, signal: undefined }),
});

const broken = defineTool({
  name: 'broken',
  description: 'Always fails',
  input: z.object({}),
  run: () => {
    throw new Error('the broken tool is broken');
  },
});

const publish = defineTool({
  name: 'publish',
  description: 'Publishes a report (a person approves each call)',
  input: z.object({ title: z.string() }),
  needsApproval: { timeoutMs: Number(process.env.FANOUT_TEST_APPROVAL_TIMEOUT_MS ?? 60_000) },
  run: ({ title }, context) => simulatedWork('publish', title, 10, context),
});

module.exports = { search, fetchPage, stubborn, broken, publish };
