import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { agentProgressQuery } from '../src/workflows/agent/messages';
import { useAgentStack } from './support/agents';
import { runCli, spawnWorker, startCli } from './support/processes';
import { waitFor } from './support/wait-for';

const suite = useAgentStack();

const waitingCall = (workflowId: string) =>
  waitFor(
    'a call to wait for approval',
    async () => (await suite.stack.client.client.workflow.getHandle(workflowId).query(agentProgressQuery)).waiting[0],
  );

it('lists a call that waits in fanout status, approves it by the run id, and shows the steps in results --json', async () => {
  const handle = await suite.stack.client.startParallel([
    {
      id: 'shipper',
      prompt: 'Ship [[tool:search {"q":"facts"}]] [[tool:publish {"title":"Report"}]]',
      tools: ['search', 'publish'],
    },
  ]);
  const child = `${handle.workflowId}/agent:shipper`;
  await waitingCall(child);

  const status = await runCli(['status', handle.workflowId, ...suite.connectionArgs]);
  expect(status.code).toBe(0);
  expect(status.stdout).toContain(`agent shipper (${child}): 2 steps, 1 tool calls`);
  expect(status.stdout).toContain(`waiting for approval: call_2_1 publish("Report") (step 2;`);
  expect(status.stdout).toContain(`-> fanout approve ${child} call_2_1`);

  const approve = await runCli(['approve', handle.workflowId, 'call_2_1', ...suite.connectionArgs]);
  expect(approve.stderr).toBe('');
  expect(approve.stdout).toBe(`approved call_2_1 of ${child}\n`);
  await handle.result();

  const results = await runCli(['results', handle.workflowId, '--json', ...suite.connectionArgs]);
  expect(results.code).toBe(0);
  const [agent] = (
    JSON.parse(results.stdout) as {
      results: { steps: number; transcript: { role: string; content: string | null }[] }[];
    }
  ).results;
  expect(agent.steps).toBe(3);
  expect(agent.transcript.map((message) => message.role)).toEqual([
    'user',
    'assistant',
    'tool',
    'assistant',
    'tool',
    'assistant',
  ]);
  expect(agent.transcript[4].content).toBe('publish found: Report');
});

it('denies a call with fanout approve --deny, and refuses a call that does not wait', async () => {
  const handle = await suite.stack.client.startParallel([
    { id: 'held', prompt: 'Ship [[tool:publish {"title":"Draft"}]]', tools: ['publish'] },
  ]);
  const child = `${handle.workflowId}/agent:held`;
  await waitingCall(child);
  const wrong = await runCli(['approve', child, 'call_7_7', ...suite.connectionArgs]);
  expect(wrong.code).not.toBe(0);
  expect(wrong.stderr).toContain('no call "call_7_7" waits for approval');
  const denied = await runCli(['approve', child, 'call_1_1', '--deny', 'needs legal review', ...suite.connectionArgs]);
  expect(denied.stdout).toBe(`denied call_1_1 of ${child}\n`);
  const { results } = await handle.result();
  expect(results[0].output).toContain('denied: a person denied the call: needs legal review');
});

it("shows the steps and tool calls of a run's agents in fanout watch", async () => {
  const handle = await suite.stack.client.startParallel([
    { id: 'plain', prompt: 'hello [sim latency=1500]' },
    {
      id: 'digger',
      prompt:
        'Dig [sim latency=300] [[tool:search {"q":"one"}, tool:fetch_page {"url":"two"}]] [[tool:search {"q":"three"}]]',
      tools: ['search', 'fetch_page'],
    },
    {
      id: 'lead',
      prompt: `Split [[tool:spawn_agents ${JSON.stringify({ tasks: [{ prompt: 'sub [sim latency=400] [[tool:search {"q":"deep"}]]', tools: ['search'] }] })}]]`,
      tools: ['spawn_agents', 'search'],
    },
  ]);
  const watch = await runCli(['watch', handle.workflowId, ...suite.connectionArgs]);
  expect(watch.code).toBe(0);
  for (const line of [
    'digger step 1 tool-call: search("one")',
    'digger step 1 tool-call: fetch_page("two")',
    'digger step 1 tool-result: search("one") ok: search found: one',
    'digger step 2 tool-call: search("three")',
    'digger step 3 answer: [simulated] answer to: Dig',
    // A sub-agent's steps, its last answer included though it finished between two looks.
    'lead.1-1-1 step 1 tool-call: search("deep")',
    'lead.1-1-1 step 2 answer: [simulated] answer to: sub',
  ]) {
    expect(watch.stdout).toContain(line);
  }
});

it("a batch's agent: fanout status lists its waiting call, approve by the batch id answers it, batch status --watch shows its steps", async () => {
  const directory = mkdtempSync(path.join(tmpdir(), 'fanout-batch-agent-'));
  const source = path.join(directory, 'tasks.jsonl');
  writeFileSync(
    source,
    `${[
      { id: 'plain', prompt: 'hello' },
      {
        id: 'shipper',
        prompt: 'Ship [[tool:search {"q":"facts"}]] [[tool:publish {"title":"Report"}]]',
        tools: ['search', 'publish'],
      },
    ]
      .map((task) => JSON.stringify(task))
      .join('\n')}\n`,
  );
  const handle = await suite.stack.client.startBatch({ source, sink: path.join(directory, 'out.jsonl') });
  const child = `${handle.batchId}/agent:shipper`;
  await waitingCall(child);
  const watching = startCli(['batch', 'status', handle.batchId, '--watch', ...suite.connectionArgs]);

  const status = await runCli(['status', handle.batchId, ...suite.connectionArgs]);
  expect(status.code).toBe(0);
  expect(status.stdout).toContain(`agent shipper (${child}): 2 steps, 1 tool calls`);
  expect(status.stdout).toContain(`-> fanout approve ${child} call_2_1`);
  // The watcher has seen the call wait before it is approved.
  await waitFor('the watcher to show the call waiting', () =>
    watching.output().includes('shipper step 2 approval-waiting: call_2_1'),
  );
  const approve = await runCli(['approve', handle.batchId, 'call_2_1', ...suite.connectionArgs]);
  expect(approve.stderr).toBe('');
  expect(approve.stdout).toBe(`approved call_2_1 of ${child}\n`);

  const watch = await watching.done;
  expect(watch.code).toBe(0);
  for (const line of [
    'shipper step 1 tool-call: search("facts")',
    'shipper step 2 approval-waiting: call_2_1 publish("Report")',
    'shipper step 2 approved: call_2_1',
    'shipper step 3 answer: [simulated] answer to: Ship',
  ])
    expect(watch.stdout).toContain(line);
  expect(watch.stdout).toContain('ok 2, failed 0');
});

it('loads a TypeScript --tools module named by a relative path, with or without ./', async () => {
  const root = path.resolve(__dirname, '..');
  for (const module of ['examples/research-tools.ts', './examples/research-tools.ts']) {
    const worker = await spawnWorker({
      address: suite.servers.server.address,
      taskQueue: `tools-path-${module.length}`,
      cwd: root,
      args: ['--tools', module],
    });
    try {
      expect(worker.output()).toContain('; tools publish_report, web_search');
    } finally {
      await worker.stop();
    }
  }
});

it('refuses to start a worker whose --tools module exports no tool, naming the module', async () => {
  const module = path.join(__dirname, 'support', 'mcp-server.js');
  const worker = await runCli(['worker', '--tools', module, ...suite.connectionArgs]);
  expect(worker.code).not.toBe(0);
  expect(worker.stderr).toContain(`tools module ${module} exports no tool made by defineTool`);
});
