import type { Browser } from 'playwright-core';
import { launchChromium } from './support/browser';
import { screenshotPath } from './support/screenshots';
import { useTestStack } from './support/suite-stack';

let browser: Browser;
const suite = useTestStack({
  beforeStop: async () => {
    await browser?.close();
  },
});

beforeAll(async () => {
  browser = await launchChromium();
});

it('shows a finished fan-out, its summary and its agents in the Temporal UI', async () => {
  const handle = await suite.stack.client.startParallel(
    [
      { id: 'researcher', name: 'Researcher', prompt: 'x [sim latency=100]' },
      { id: 'analyst', name: 'Analyst', prompt: 'x [sim latency=200]' },
      { id: 'writer', name: 'Writer', prompt: 'x [sim latency=300]' },
    ],
    {},
    { summary: 'UI check: fan-out of 3 agents' },
  );
  await handle.result();

  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const ui = suite.servers.server.uiUrl;
  await page.goto(`${ui}/namespaces/default/workflows`);
  await page.getByText(handle.workflowId).first().waitFor({ timeout: 30_000 });

  await page.goto(`${ui}/namespaces/default/workflows/${handle.workflowId}`);
  await page.getByText('UI check: fan-out of 3 agents').first().waitFor({ timeout: 30_000 });
  for (const name of ['Researcher', 'Analyst', 'Writer'])
    await page.getByText(name, { exact: true }).first().waitFor({ timeout: 30_000 });
  await page.screenshot({ path: screenshotPath('temporal-ui-fan-out.png'), fullPage: true });
  await page.close();
});
