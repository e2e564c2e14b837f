// A small MCP server for the agent tests: `lookup` answers from a table, `explode` always fails, `wait` answers after
// `ms` milliseconds. Run as a stdio server
// (`node test/support/mcp-server.js`) or served over Streamable HTTP by `startHttpMcpServer()`.
const { createServer } = require('node:http');
const { z } = require('zod');
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');

function buildServer(label) {
  const server = new McpServer({ name: `test-${label}`, version: '1.0.0' });
  server.registerTool(
    `lookup_${label}`,
    { description: 'Looks a key up', inputSchema: { key: z.string() } },
    async ({ key }) => ({ content: [{ type: 'text', text: `${label} value of ${key}` }] }),
  );
  server.registerTool(
    `wait_${label}`,
    { description: 'Answers after a while', inputSchema: { ms: z.number() } },
    async ({ ms }) => {
      await new Promise((resolve) => setTimeout(resolve, ms));
      return { content: [{ type: 'text', text: `${label} waited ${ms} ms` }] };
    },
  );
  server.registerTool(`explode_${label}`, { description: 'Always fails', inputSchema: {} }, async () => ({
    content: [{ type: 'text', text: `${label} exploded` }],
    isError: true,
  }));
  return server;
}

/**
 * Serves the tools over Streamable HTTP (stateless: a server per request); resolves to { url, calls, close }. `refuse`,
 * given a request's JSON-RPC body, says to answer it 502 as a proxy in front of the server would, never reaching it.
 */
async function startHttpMcpServer({ refuse } = {}) {
  const calls = [];
  const http = createServer(async (request, response) => {
    const chunks = [];
    for await (const chunk of request) chunks.push(chunk);
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
    if (refuse && refuse(body)) {
      response.writeHead(502, { 'content-type': 'text/plain' }).end('Bad Gateway');
      return;
    }
    if (body && body.method === 'tools/call') calls.push(body.params.name);
    const server = buildServer('http');
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    response.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(request, response, body);
  });
  await new Promise((resolve) => http.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${http.address().port}/mcp`,
    calls,
    close: () =>
      new Promise((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      }),
  };
}

if (require.main === module) {
  void buildServer('stdio').connect(new StdioServerTransport());
}

module.exports = { startHttpMcpServer };
