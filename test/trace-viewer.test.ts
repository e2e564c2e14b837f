import path from 'node:path';
import { FanoutClient } from '../src/client/fanout-client';
import type { Locator } from 'playwright-core';
import { launchChromium } from './support/browser';
import { startPhoenix, type Phoenix } from './support/phoenix';
import { spawnWorker, type WorkerProcess } from './support/processes';
import { screenshotPath } from './support/screenshots';
import { simulatorEnvironment, useTestServers } from './support/suite-stack';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

// A real LLM trace viewer: a traced worker process sends a run of an agent with tools and a sub-agent to Arize Phoenix,
// and headless Chromium opens the trace in Phoenix's UI. The screenshot README shows is saved to docs/ only with
// REFRESH_DOCS_SCREENSHOTS=1 (CONTRIBUTING.md, "Screenshots"); otherwise to a folder under the system's tmp.
const TOOLS = path.join(__dirname, 'support', 'agent-tools.js');
const PROJECT = 'fanout-traces';
let phoenix: Phoenix | undefined;
let worker: WorkerProcess | undefined;
const suite = useTestServers({
  beforeStop: async () => {
    await worker?.stop();
    await phoenix?.stop();
  },
});
beforeAll(async () => {
  phoenix = await startPhoenix();
}, 240_000);

interface PhoenixSpans {
  projects: {
    edges: {
      node: {
        id: string;
        name: string;
        spans: { edges: { node: { id: string; name: string; context: { traceId: string } } }[] };
      };
    }[];
  };
}

it("opens a run's trace in a real trace viewer's UI (Arize Phoenix): the agent, its model calls, its tools and its sub-agent", async () => {
  const viewer = phoenix as Phoenix;
  const { server, simulator } = suite.servers;
  const taskQueue = uniqueName('tq-phoenix');
  worker = await spawnWorker({
    address: server.address,
    taskQueue,
    env: {
      ...simulatorEnvironment(simulator),
      FANOUT_TEST_SIM_URL: simulator.baseUrl,
      OTEL_EXPORTER_OTLP_ENDPOINT: viewer.url,
      OTEL_SERVICE_NAME: 'fanout-worker',
      // Phoenix files spans by this resource attribute (else under "default").
      OTEL_RESOURCE_ATTRIBUTES: `openinference.project.name=${PROJECT}`,
      OTEL_BSP_SCHEDULE_DELAY: '200',
    },
    args: ['--tools', TOOLS],
  });
  const client = await FanoutClient.connect({ client: server.client, taskQueue });
  const dig = JSON.stringify({ tasks: [{ prompt: 'dig deeper [[tool:search {"q":"deep"}]]', tools: ['search'] }] });
  const handle = await client.startParallel([
    {
      id: 'lead',
      prompt: `Research [[tool:search {"q":"facts"}]] [[tool:spawn_agents ${dig}]]`,
      tools: ['spawn_agents', 'search'],
    },
  ]);
  const { results } = await handle.result();
  expect(results[0].status).toBe('ok');

  const wanted = ['invoke_agent lead', 'execute_tool search', 'execute_tool spawn_agents', 'RunWorkflow:fanOut'];
  const { projectId, traceId, agentSpanId } = await waitFor(
    'the whole trace in Phoenix',
    async () => {
      const data = await viewer.graphql<PhoenixSpans>(
        `{ projects { edges { node { id name spans(first: 500) { edges { node { id name context { traceId } } } } } } } }`,
      );
      const project = data.projects.edges.find((edge) => edge.node.name === PROJECT)?.node;
      const spans = project?.spans.edges.map((edge) => edge.node) ?? [];
      const names = new Set(spans.map((span) => span.name));
      const root = spans.find((span) => span.name === 'RunWorkflow:fanOut');
      const agent = spans.find((span) => span.name === 'invoke_agent lead');
      const chats = spans.filter((span) => span.name.startsWith('chat ')).length;
      // The lead's three steps and the sub-agent's two.
      if (project && root && agent && chats >= 5 && wanted.every((name) => names.has(name)))
        return { projectId: project.id, traceId: root.context.traceId, agentSpanId: agent.id };
      // Said if the wait runs out: what Phoenix holds so far.
      throw new Error(
        `Phoenix has ${spans.length} spans, ${chats} chat, lacking ${wanted.filter((n) => !names.has(n))}`,
      );
    },
    // Phoenix (Python) ingests slowly on a loaded machine: the spans were sent when the run ended.
    { timeoutMs: 120_000, intervalMs: 500 },
  );

  const browser = await launchChromium();
  try {
    const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
    // The trace with the agent's span selected (the URL the UI itself makes when one clicks the span): its
    // attributes (tokens, cost, steps) show beside the span tree. The page also holds hidden copies of attribute
    // names: only a visible one counts.
    const traceUrl = `${viewer.url}/projects/${projectId}/traces/${traceId}?selectedSpanNodeId=${agentSpanId}`;
    const costShown = page.getByText('fanout.cost_usd').filter({ visible: true }).first();
    let attempts = 0;
    await waitFor(
      "the agent span's attributes",
      async () => {
        // Each attempt loads the page afresh: a page that broke while a loaded machine starved it (the wait ran out
        // in three whole suites, while clicks on the span were repeated in one page) does not hold the test.
        attempts += 1;
        await page.goto(traceUrl);
        // Phoenix may draw the span's Attributes card folded (in three whole suites; opened by this URL it is open when
        // the machine is idle): unfold it. Whichever the page shows first, the attributes or the folded card, is
        // waited for (a loaded machine drew the card folded after a look at it had found none).
        const folded = page.getByRole('button', { name: /^Attributes/, expanded: false }).first();
        const appears = (locator: Locator, timeout: number) =>
          locator.waitFor({ timeout }).then(
            () => true,
            () => false,
          );
        if (await appears(costShown.or(folded).first(), 30_000)) {
          if (await costShown.isVisible()) return true;
          await folded.click({ timeout: 10_000 }).catch(() => undefined);
          if (await appears(costShown, 20_000)) return true;
        }
        // Said if the wait runs out: what the page showed, and a screenshot of it.
        await page.screenshot({ path: screenshotPath('trace-phoenix-failed.png') }).catch(() => undefined);
        const body = await page.innerText('body').catch((error: Error) => error.message);
        throw new Error(`attempt ${attempts}: the page shows ${JSON.stringify(body.slice(0, 1500))}`);
      },
      // Phoenix's page and headless Chromium beside a suite's heaviest files: alone it takes about 1 s.
      { timeoutMs: 150_000, intervalMs: 500 },
    );
    // The trace's span tree, as the viewer draws it.
    for (const name of ['RunWorkflow:fanOut', 'invoke_agent lead', 'execute_tool spawn_agents'])
      await page.getByText(name, { exact: true }).first().waitFor({ timeout: 30_000 });
    const text = await page.innerText('body');
    expect(text).toContain('execute_tool search');
    expect(text).toMatch(/chat \S+/);
    await page.screenshot({ path: screenshotPath('trace-phoenix.png') });
  } finally {
    await browser.close();
  }
}, 420_000);
