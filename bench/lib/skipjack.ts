// Skipjack under test: the server in this process, its workers as real processes over HTTP.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import pino from 'pino';
import { SkipjackClient } from '../../protocol/client.js';
import type { EnqueueJob } from '../../protocol/schemas.js';
import { configFromEnv, type ServerConfig } from '../../server/config.js';
import { startServer, type RunningServer } from '../../server/main.js';
import { benchPool } from './postgres.js';
import { startTsChild, stopChild, waitForLine } from './procs.js';
import { Progress } from './progress.js';
import { sleep } from './stats.js';

export const benchRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
export const repoRoot = join(benchRoot, '..');

export interface Skipjack {
  server: RunningServer;
  client: SkipjackClient;
  /** A pool of the bench's own, for measurements straight from the database. */
  pool: pg.Pool;
  close(): Promise<void>;
}

export async function startSkipjack(databaseUrl: string, overrides: Partial<ServerConfig> = {}): Promise<Skipjack> {
  const config = configFromEnv({}, { port: 0, databaseUrl, logLevel: 'silent', ...overrides });
  const server = await startServer(config, pino({ level: 'silent' }));
  const pool = benchPool(databaseUrl, 2);
  return {
    server,
    client: new SkipjackClient({ baseUrl: server.url, timeoutMs: 120_000 }),
    pool,
    async close() {
      await pool.end();
      await server.close();
    },
  };
}

export interface WorkerProcs {
  procs: ChildProcess[];
  ids: string[];
  stop(): Promise<void>;
}

/** Noop workers (bench/worker-process.ts), or real ones through the CLI with kind 'cli'. */
export async function startWorkers(
  serverUrl: string,
  count: number,
  slots: number,
  opts: { kind?: 'noop' | 'cli'; extraArgs?: string[]; nodeArgs?: string[]; onStdout?: (line: string) => void } = {},
): Promise<WorkerProcs> {
  const procs: ChildProcess[] = [];
  const ids: string[] = [];
  const env = { ...process.env, LOG_LEVEL: process.env.BENCH_WORKER_LOG_LEVEL ?? 'warn' };
  const stop = async () => void (await Promise.all(procs.map((p) => stopChild(p))));
  const nodeArgs = [...launcherNodeFlags(), ...(opts.nodeArgs ?? [])];
  try {
    for (let i = 0; i < count; i++) {
      const child =
        opts.kind === 'cli'
          ? startTsChild(
              join(repoRoot, 'cli/main.ts'),
              [
                '--server',
                serverUrl,
                'worker',
                '--slots',
                String(slots),
                '--name',
                `bench-cli-${i}`,
                ...(opts.extraArgs ?? []),
              ],
              { cwd: repoRoot, env, nodeArgs },
            )
          : startTsChild(
              join(benchRoot, 'worker-process.ts'),
              ['--server', serverUrl, '--slots', String(slots), ...(opts.extraArgs ?? [])],
              { cwd: repoRoot, env, nodeArgs },
            );
      procs.push(child);
    }
    if (opts.kind === 'cli') {
      // The CLI prints nothing on stdout; wait until the server lists every worker.
      const client = new SkipjackClient({ baseUrl: serverUrl });
      const deadline = Date.now() + 30_000;
      for (;;) {
        const { workers } = await client.workers();
        const mine = workers.filter((w) => w.name.startsWith('bench-cli-'));
        if (mine.length >= count) {
          ids.push(...mine.map((w) => w.id));
          break;
        }
        if (Date.now() > deadline) throw new Error('CLI workers did not register within 30 s');
        await sleep(100);
      }
    } else {
      for (const line of await Promise.all(procs.map((p) => waitForLine(p, (l) => l.startsWith('ready ')))))
        ids.push(line.split(' ')[1]);
    }
    if (opts.onStdout) {
      for (const p of procs) {
        let buf = '';
        p.stdout?.on('data', (d: Buffer) => {
          buf += d.toString();
          let i;
          while ((i = buf.indexOf('\n')) >= 0) {
            opts.onStdout!(buf.slice(0, i));
            buf = buf.slice(i + 1);
          }
        });
      }
    } else {
      for (const p of procs) p.stdout?.resume();
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { procs, ids, stop };
}

/**
 * The Node flags bin/skipjack starts Skipjack with (its `exec node` line): the bench's worker
 * processes run with them too, as `skipjack worker` does, whichever entry they start from.
 */
export function launcherNodeFlags(): string[] {
  const line = readFileSync(join(repoRoot, 'bin/skipjack'), 'utf8')
    .split('\n')
    .find((l) => l.startsWith('exec node '));
  if (!line) throw new Error('bin/skipjack has no "exec node" line to take the Node flags from');
  return line.split(/\s+/).filter((word) => word.startsWith('--'));
}

/** Enqueue n copies of a job through POST /jobs {jobs: [...]}, in batches. */
export async function enqueueMany(
  client: SkipjackClient,
  n: number,
  job: EnqueueJob,
  label: string,
  batch = 2000,
): Promise<void> {
  const progress = new Progress(label, n);
  for (let done = 0; done < n;) {
    const size = Math.min(batch, n - done);
    await client.enqueueBatch(Array.from({ length: size }, () => job));
    done += size;
    progress.update(done);
  }
  progress.done();
}

/**
 * `n` pending jobs running `command`, in one statement: the workers, started and idle before it,
 * see the whole backlog at its commit (one NOTIFY), so no worker's start-up falls inside the
 * drain being measured. They are the rows an enqueue of {command} stores.
 */
export async function insertBacklog(pool: pg.Pool, n: number, command: string[]): Promise<void> {
  await pool.query(`INSERT INTO jobs (command) SELECT $1::text[] FROM generate_series(1, $2::int)`, [command, n]);
}

/**
 * Waits until `total` jobs are terminal, drawing progress. Progress comes from the server's own
 * count of releases since the call, in memory, as the peers' progress does: counting the table
 * every 100 ms scanned 20,000 rows each time, 4 ms of the database's CPU (2% of this machine) that
 * the drain being measured did not otherwise need. The table is counted once the releases add up,
 * and every 2 s whatever they say (a job can also end without a release: reaped, or cancelled).
 */
export async function waitTerminal(sj: Skipjack, total: number, label: string, timeoutMs = 600_000): Promise<void> {
  const progress = new Progress(label, total);
  const deadline = Date.now() + timeoutMs;
  const releases = async () => (await sj.server.metrics.released.get()).values.reduce((n, v) => n + v.value, 0);
  const terminal = async () =>
    (await sj.pool.query(`SELECT count(*)::int AS n FROM jobs WHERE state IN ('succeeded', 'failed', 'cancelled')`))
      .rows[0].n as number;
  const before = await releases();
  let counted = Date.now();
  try {
    for (;;) {
      const n = Math.min((await releases()) - before, total);
      progress.update(n);
      if (n >= total || Date.now() - counted > 2000) {
        counted = Date.now();
        if ((await terminal()) >= total) return;
      }
      if (Date.now() > deadline)
        throw new Error(`${label}: only ${await terminal()}/${total} jobs finished within ${timeoutMs} ms`);
      await sleep(n >= total ? 100 : 20);
    }
  } finally {
    progress.done();
  }
}

/** First claim to last release, from the database: jobs/s over that span. */
export async function drainSpan(
  pool: pg.Pool,
): Promise<{ jobs: number; seconds: number; jobsPerSec: number; failed: number }> {
  const { rows } = await pool.query(`
    SELECT count(*)::int AS n, count(*) FILTER (WHERE state <> 'succeeded')::int AS failed,
           extract(epoch FROM max(finished_at) - min(started_at))::float8 AS s
    FROM jobs`);
  const { n, s, failed } = rows[0];
  return { jobs: n, seconds: Math.round(s * 1000) / 1000, jobsPerSec: Math.round(n / s), failed };
}
