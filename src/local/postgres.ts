import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, createWriteStream, existsSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { Environment } from '../config/environment';
import { freePort } from './free-port';
import { diesWithParent, exitOf } from './child-processes';
import { FatalWaitError, waitFor } from './wait-for';

/** A private PostgreSQL server: its own data directory, listening on 127.0.0.1 only. */
export interface PostgresServer {
  readonly port: number;
  /** The superuser, with trust authentication (the server only listens on 127.0.0.1 and its own socket directory). */
  readonly user: string;
  /** True when this start ran initdb, i.e. the databases do not exist yet. */
  readonly fresh: boolean;
  /** Fast shutdown: open transactions roll back, everything committed is kept. */
  stop(): Promise<void>;
}

export interface PostgresOptions {
  /** Holds `data/`, `socket/` and `postgres.log`; an existing `data/` is reused. */
  directory: string;
  port?: number;
}

const SUPERUSER = 'temporal';

/**
 * The directory with `initdb` and `postgres`: $POSTGRES_BIN_DIR, else the newest Debian/Ubuntu install under
 * /usr/lib/postgresql, else whatever `initdb` is on PATH.
 */
export function findPostgresBinaries(environment: Environment = process.env): string {
  const explicit = environment.POSTGRES_BIN_DIR?.trim();
  if (explicit) {
    if (existsSync(path.join(explicit, 'postgres'))) return explicit;
    throw new Error(`POSTGRES_BIN_DIR is '${explicit}', which has no postgres binary`);
  }
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((version) => existsSync(path.join(debian, version, 'bin', 'postgres')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions.length > 0) return path.join(debian, versions[0], 'bin');
  }
  try {
    return path.dirname(execFileSync('bash', ['-c', 'command -v initdb'], { encoding: 'utf8' }).trim());
  } catch {
    throw new Error(
      'PostgreSQL is not installed: apt-get install postgresql (or set POSTGRES_BIN_DIR to its bin directory)',
    );
  }
}

/**
 * PostgreSQL refuses to run as root, so under root the server runs as the `postgres` account the Debian package
 * creates; any other user runs it as themselves.
 */
function serverAccount(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    return { uid, gid };
  } catch {
    throw new Error(
      'running as root, PostgreSQL needs a non-root account to run as, and there is no "postgres" user (apt-get install postgresql creates it)',
    );
  }
}

/** Initialises (once) and starts a PostgreSQL server in `options.directory`, resolving when it accepts connections. */
export async function startPostgres(options: PostgresOptions): Promise<PostgresServer> {
  const binaries = findPostgresBinaries();
  const account = serverAccount();
  const dataDirectory = path.join(options.directory, 'data');
  const socketDirectory = path.join(options.directory, 'socket');
  const logFile = path.join(options.directory, 'postgres.log');
  mkdirSync(options.directory, { recursive: true });
  mkdirSync(socketDirectory, { recursive: true });
  if (account) {
    chownSync(options.directory, account.uid, account.gid);
    chownSync(socketDirectory, account.uid, account.gid);
  }
  const asServerAccount = { ...account, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C', LC_ALL: 'C' } };

  const fresh = !existsSync(path.join(dataDirectory, 'PG_VERSION'));
  if (fresh) {
    try {
      execFileSync(
        path.join(binaries, 'initdb'),
        ['-D', dataDirectory, '-U', SUPERUSER, '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-sync'],
        { ...asServerAccount, stdio: ['ignore', 'ignore', 'pipe'] },
      );
    } catch (error) {
      const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? '';
      throw new Error(`initdb failed in ${dataDirectory}: ${stderr.trim() || String(error)}`);
    }
  }

  const port = options.port ?? (await freePort());
  // Commits do not wait for their WAL flush: a PostgreSQL crash could lose the last few hundred milliseconds, never
  // corrupt data. This server is for tests and local runs, where that buys a lot of speed on a shared disk.
  // SIGINT on our death is PostgreSQL's fast shutdown. setpriv execs postgres, so the child is postgres itself.
  const [command, args] = diesWithParent(
    path.join(binaries, 'postgres'),
    [
      '-D',
      dataDirectory,
      '-p',
      String(port),
      '-k',
      socketDirectory,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'synchronous_commit=off',
      '-c',
      'max_connections=200',
    ],
    'INT',
  );
  const child = spawn(command, args, { ...asServerAccount, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = createWriteStream(logFile, { flags: 'a' });
  let output = '';
  const record = (chunk: Buffer) => {
    log.write(chunk);
    if (output.length < 20_000) output += chunk.toString();
  };
  child.stdout?.on('data', record);
  child.stderr?.on('data', record);
  const exited = exitOf(child);
  // A process.exit() without stop(): shut PostgreSQL down rather than leave it holding its directory.
  const abandon = () => child.kill('SIGINT');
  process.once('exit', abandon);

  try {
    await waitFor(
      `PostgreSQL on port ${port} to accept connections`,
      () => {
        if (child.exitCode !== null)
          throw new FatalWaitError(new Error(`postgres exited with ${child.exitCode}: ${output.trim()}`));
        return output.includes('ready to accept connections');
      },
      { timeoutMs: 60_000 },
    );
  } catch (error) {
    await stopChild(child, exited);
    process.removeListener('exit', abandon);
    log.end();
    throw error;
  }

  return {
    port,
    user: SUPERUSER,
    fresh,
    stop: async () => {
      await stopChild(child, exited);
      process.removeListener('exit', abandon);
      log.end();
    },
  };
}

async function stopChild(child: ChildProcess, exited: Promise<void>): Promise<void> {
  // SIGINT is PostgreSQL's "fast" shutdown: it disconnects clients and checkpoints instead of waiting for them.
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(timer);
}
