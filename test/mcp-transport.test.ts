import { McpServerUnavailableError, McpTools } from '../src/tools/mcp';
import type { ToolContext } from '../src/tools/define-tool';
import { waitFor } from './support/wait-for';

// Plain CommonJS, started in this process (test/support/mcp-server.js).
const { startHttpMcpServer } = require('./support/mcp-server') as {
  startHttpMcpServer: (options?: { refuse?: (body: unknown) => boolean }) => Promise<{
    url: string;
    calls: string[];
    close: () => Promise<void>;
  }>;
};

const context = (callId: string): ToolContext => ({
  signal: new AbortController().signal,
  taskId: 'task',
  callId,
  workflowId: 'workflow',
});

describe('an MCP server over HTTP behind a proxy that fails one request', () => {
  it("fails only that call: the others in flight on the server's connection answer, each run once", async () => {
    const refused = (body: unknown) =>
      (body as { params?: { arguments?: { key?: string } } } | undefined)?.params?.arguments?.key === 'through-502';
    const server = await startHttpMcpServer({ refuse: refused });
    const tools = new McpTools([{ name: 'http', url: server.url }]);
    try {
      const [wait, lookup] = await tools.find(['wait_http', 'lookup_http']);
      // A slow call with side effects is running when a neighbour's request comes back 502 from the proxy.
      const slow = wait.call({ ms: 1500 }, context('slow'));
      await waitFor('the slow call to reach the server', () => server.calls.includes('wait_http'));
      await expect(lookup.call({ key: 'through-502' }, context('refused'))).rejects.toBeInstanceOf(
        McpServerUnavailableError,
      );
      await expect(slow).resolves.toBe('http waited 1500 ms');
      expect(server.calls.filter((name) => name === 'wait_http')).toHaveLength(1);
      // The next call connects again and answers.
      const [again] = await tools.find(['lookup_http']);
      await expect(again.call({ key: 'k' }, context('after'))).resolves.toBe('http value of k');
    } finally {
      await tools.close();
      await server.close();
    }
  });
});
