import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { modelCalls } from './support/agents';
import { startTestServers, startTestWorker, type TestServers, type TestWorker } from './support/test-stack';

const { startHttpMcpServer } = require('./support/mcp-server.js') as {
  startHttpMcpServer(): Promise<{ url: string; calls: string[]; close(): Promise<void> }>;
};

let servers: TestServers;
let stack: TestWorker;
let http: Awaited<ReturnType<typeof startHttpMcpServer>>;

beforeAll(async () => {
  servers = await startTestServers({ simulator: { latency: { minMs: 10, maxMs: 10 } } });
  http = await startHttpMcpServer();
  stack = await startTestWorker(servers, {
    mcpServers: [
      { name: 'stdio', command: process.execPath, args: [path.join(__dirname, 'support', 'mcp-server.js')] },
      { name: 'http', url: http.url },
    ],
  });
});

afterAll(async () => {
  await stack?.stop();
  await http?.close();
  await servers?.stop();
});

it('calls the tools of a stdio and a Streamable HTTP MCP server, a failing one reported to the model', async () => {
  const prompt =
    'Look up [[tool:lookup_stdio {"key":"alpha"}, tool:lookup_http {"key":"beta"}]] [[tool:explode_http {}]]';
  const handle = await stack.client.startParallel([
    { id: 'mcp-user', prompt, tools: ['lookup_stdio', 'lookup_http', 'explode_http'] },
  ]);
  const { results } = await handle.result();
  expect(results[0].status).toBe('ok');
  expect(results[0].output).toContain(
    'from 3 tool results: stdio value of alpha | http value of beta | error: http exploded',
  );
  expect(http.calls).toEqual(['lookup_http', 'explode_http']);
  expect(modelCalls(servers.simulator, 'mcp-user')).toHaveLength(3);
});

it('fails an agent that names a tool no worker offers, without calling the model', async () => {
  const handle = await stack.client.startParallel([
    { id: 'lost', prompt: 'Use [[tool:nowhere {}]]', tools: ['nowhere'] },
  ]);
  const { results } = await handle.result();
  expect(results[0].status).toBe('failed');
  expect(results[0].error?.type).toBe('UnknownTool');
  expect(results[0].error?.message).toContain('nowhere');
  expect(modelCalls(servers.simulator, 'lost')).toHaveLength(0);
});

it('has stopped its stdio MCP server by the time the worker has stopped', async () => {
  /** This process's children running the stdio MCP server. */
  const stdioServers = () =>
    execFileSync('ps', ['-o', 'args=', '--ppid', String(process.pid)], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.includes('mcp-server.js'));
  expect(stdioServers()).toHaveLength(1); // started by the first test's call
  await stack.stop();
  expect(stdioServers()).toEqual([]);
});
