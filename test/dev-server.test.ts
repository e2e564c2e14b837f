import { createServer, type Server } from 'node:net';
import { startDevServer } from '../src/local/dev-server';
import * as freePortModule from '../src/local/free-port';

// A port chosen free can be taken before the dev server binds it (parallel tests start servers of their own).
// These tests take the port first on purpose and watch what startDevServer does with it.

function hold(): Promise<{ server: Server; port: number }> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve({ server, port: typeof address === 'object' && address !== null ? address.port : 0 });
    });
  });
}

describe('startDevServer on a port taken between its choice and the bind', () => {
  let held: { server: Server; port: number };
  beforeEach(async () => {
    held = await hold();
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await new Promise((resolve) => held.server.close(resolve));
  });

  it('starts again on fresh ports when a port it chose itself was taken', async () => {
    const real = freePortModule.freePort;
    // The first port handed out is the taken one: it becomes the Web UI's, whose bind then fails.
    const chosen = jest
      .spyOn(freePortModule, 'freePort')
      .mockImplementationOnce(async () => await real())
      .mockImplementationOnce(async () => held.port);
    const server = await startDevServer();
    try {
      expect(chosen.mock.calls.length).toBeGreaterThanOrEqual(4);
      expect(server.uiUrl).not.toBe(`http://127.0.0.1:${held.port}`);
      const namespace = await server.client.workflowService.describeNamespace({ namespace: 'default' });
      expect(namespace.namespaceInfo?.name).toBe('default');
    } finally {
      await server.stop();
    }
  }, 120_000);

  it('names the taken port when the caller gave it', async () => {
    await expect(startDevServer({ uiPort: held.port })).rejects.toThrow(
      new RegExp(`127\\.0\\.0\\.1:${held.port}: bind: address already in use`),
    );
  }, 120_000);
});
