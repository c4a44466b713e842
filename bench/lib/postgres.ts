// Which PostgreSQL the bench uses, and a fresh database per system under test.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort, startEmbeddedPostgres, withDatabase } from '../../server/embedded-postgres.js';

export { freePort, withDatabase };

export interface BenchPostgres {
  adminUrl: string;
  source: 'DATABASE_URL' | 'local:5432' | 'embedded';
  version: string;
  stop(): Promise<void>;
}

export interface BenchDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

const LOCAL = 'postgres://postgres@127.0.0.1:5432/postgres';

export async function openPostgres(log: (s: string) => void): Promise<BenchPostgres> {
  if (process.env.DATABASE_URL) return describe(process.env.DATABASE_URL, 'DATABASE_URL', async () => {});
  if (await reachable(LOCAL)) return describe(LOCAL, 'local:5432', async () => {});
  log('no DATABASE_URL and nothing on 127.0.0.1:5432; starting an embedded PostgreSQL');
  const dataDir = mkdtempSync(join(tmpdir(), 'skipjack-bench-pg-'));
  const embedded = await startEmbeddedPostgres({ dataDir, port: await freePort(), database: 'postgres' });
  return describe(embedded.url, 'embedded', async () => {
    await embedded.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });
}

async function describe(
  adminUrl: string,
  source: BenchPostgres['source'],
  stop: () => Promise<void>,
): Promise<BenchPostgres> {
  const version = (await adminQuery(adminUrl, 'SHOW server_version')).rows[0].server_version as string;
  return { adminUrl, source, version, stop };
}

async function reachable(url: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1500 });
  try {
    await c.connect();
    await c.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => {});
  }
}

/**
 * A pool of the bench's own. Each measured database is dropped WITH (FORCE) at the end; a
 * connection of a pool still open then (a step that failed before ending it) is terminated, and
 * a pool without an error listener would crash the run (seen once, 19:17).
 */
export function benchPool(connectionString: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString, max });
  pool.on('error', () => {});
  return pool;
}

export async function adminQuery(url: string, text: string, values?: unknown[]): Promise<pg.QueryResult> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await c.query(text, values);
  } finally {
    await c.end();
  }
}

const live = new Set<string>();
let liveAdmin = '';

/** CREATE DATABASE bench_<label>_<random>; drop() removes it (forcing off stray sessions). */
export async function createBenchDatabase(pgs: BenchPostgres, label: string): Promise<BenchDatabase> {
  const name = `bench_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${randomBytes(3).toString('hex')}`;
  await adminQuery(pgs.adminUrl, `CREATE DATABASE ${name}`);
  live.add(name);
  liveAdmin = pgs.adminUrl;
  return {
    name,
    url: withDatabase(pgs.adminUrl, name),
    async drop() {
      live.delete(name);
      await adminQuery(pgs.adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

/** On an error path: drop every bench database this run created and still holds. */
export async function dropLeftoverDatabases(): Promise<void> {
  for (const name of [...live]) {
    live.delete(name);
    await adminQuery(liveAdmin, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
  }
}

export async function withBenchDatabase<T>(
  pgs: BenchPostgres,
  label: string,
  fn: (url: string) => Promise<T>,
): Promise<T> {
  const db = await createBenchDatabase(pgs, label);
  try {
    return await fn(db.url);
  } finally {
    await db.drop();
  }
}
