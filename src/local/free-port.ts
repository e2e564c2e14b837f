import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** The lowest port the OS may hand out as the local end of an outgoing connection (Linux's default elsewhere). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 ? low : 32768;
  } catch {
    return 32768;
  }
}

/** Listens on `port` (0: one the OS picks) on 127.0.0.1, closes again, and gives the port, or undefined if taken. */
function tryPort(port: number): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) =>
      error.code === 'EADDRINUSE' || error.code === 'EACCES' ? resolve(undefined) : reject(error),
    );
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      const bound = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(bound));
    });
  });
}

const handedOut = new Set<number>();

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, for a server about to be started on it. It is drawn at random
 * from below the OS's ephemeral range: a port the OS picked (listen on port 0) is in that range, where any outgoing
 * connection of any process on the machine may take it as its local port before the server binds it, which a test
 * run with hundreds of connections did. No port is handed out twice by one process.
 */
export async function freePort(): Promise<number> {
  const high = Math.min(ephemeralLow(), 65536);
  const low = 10_000;
  for (let attempt = 0; high - low >= 1000 && attempt < 100; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (handedOut.has(port)) continue;
    if ((await tryPort(port)) !== undefined) {
      handedOut.add(port);
      return port;
    }
  }
  const port = await tryPort(0);
  if (port === undefined) throw new Error('no free TCP port on 127.0.0.1');
  handedOut.add(port);
  return port;
}
