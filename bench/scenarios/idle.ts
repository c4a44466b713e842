// Idle: what long-polling workers with nothing to do cost the database and the server. The
// server runs in this process (its CPU is this process's); the pollers run in a child process.
import { join } from 'node:path';
import type pg from 'pg';
import { createBenchDatabase } from '../lib/postgres.js';
import { startTsChild, stopChild, waitForLine } from '../lib/procs.js';
import { note, Progress } from '../lib/progress.js';
import { queryCount, startQueryStats, stopQueryStats } from '../lib/query-stats.js';
import { table } from '../lib/results.js';
import { benchRoot, repoRoot, startSkipjack } from '../lib/skipjack.js';
import { round, sleep } from '../lib/stats.js';
import type { ScenarioContext, ScenarioOutput } from './context.js';

const TRICKLE_MS = 200;

interface Window {
  seconds: number;
  transactionsPerSec: number;
  statementsPerSec: number;
  serverCpuPercent: number;
}

async function xacts(pool: pg.Pool, dbName: string): Promise<number> {
  await pool.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await pool.query(
    'SELECT (xact_commit + xact_rollback)::float8 AS n FROM pg_stat_database WHERE datname = $1',
    [dbName],
  );
  return rows[0].n;
}

async function measureWindow(pool: pg.Pool, dbName: string, seconds: number, label: string): Promise<Window> {
  const x0 = await xacts(pool, dbName);
  startQueryStats();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const progress = new Progress(label, seconds);
  for (let s = 0; s < seconds; s++) {
    await sleep(1000);
    progress.update(s + 1);
  }
  progress.done();
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const statements = queryCount();
  stopQueryStats();
  const x1 = await xacts(pool, dbName);
  return {
    seconds: round(elapsed, 1),
    // The bench's own two reads of pg_stat_database count too; they are negligible.
    transactionsPerSec: round((x1 - x0) / elapsed, 1),
    statementsPerSec: round(statements / elapsed, 1),
    serverCpuPercent: round(((cpu.user + cpu.system) / 1e6 / elapsed) * 100, 2),
  };
}

export async function idle(ctx: ScenarioContext): Promise<ScenarioOutput> {
  const count = ctx.quick ? 50 : 200;
  const seconds = 30; // one full long-poll cycle (waitMs 30000), also in quick mode
  const db = await createBenchDatabase(ctx.pg, 'sj_idle');
  const sj = await startSkipjack(db.url);
  try {
    await sleep(1000);
    const baseline = await measureWindow(sj.pool, db.name, Math.min(seconds, 10), 'idle: server alone');
    note(`server alone: ${baseline.transactionsPerSec} tx/s, ${baseline.serverCpuPercent}% CPU`);
    const child = startTsChild(
      join(benchRoot, 'idle-pollers.ts'),
      ['--server', sj.server.url, '--count', String(count)],
      { cwd: repoRoot },
    );
    let stats = '';
    try {
      await waitForLine(child, (l) => l.startsWith('ready '), 60_000);
      child.stdout?.on('data', (d: Buffer) => (stats += d.toString()));
      // Let every poller's first claim (a real query) land before the window opens: the window
      // measures what idle workers cost, not what joining costs.
      await sleep(10_000);
      const loaded = await measureWindow(sj.pool, db.name, seconds, `idle: ${count} pollers`);
      note(
        `${count} pollers: ${loaded.transactionsPerSec} tx/s, ${loaded.statementsPerSec} statements/s, ${loaded.serverCpuPercent}% CPU`,
      );
      // Nearly idle: single jobs now and then. Each wakes one worker, not all of them.
      const trickle = setInterval(() => void sj.client.enqueue({ command: ['true'] }).catch(() => {}), TRICKLE_MS);
      const trickled = await measureWindow(
        sj.pool,
        db.name,
        seconds,
        `idle: ${count} pollers, a job every ${TRICKLE_MS} ms`,
      ).finally(() => clearInterval(trickle));
      note(
        `${count} pollers, a job every ${TRICKLE_MS} ms: ${trickled.transactionsPerSec} tx/s, ${trickled.statementsPerSec} statements/s, ${trickled.serverCpuPercent}% CPU`,
      );
      await stopChild(child);
      const per = (v: number, b: number) => round((v - b) / count, 3);
      return {
        skipjack: {
          pollers: count,
          windowSeconds: loaded.seconds,
          baseline,
          withPollers: loaded,
          withTrickle: { jobEveryMs: TRICKLE_MS, ...trickled },
          perPoller: {
            transactionsPerSec: per(loaded.transactionsPerSec, baseline.transactionsPerSec),
            statementsPerSec: per(loaded.statementsPerSec, baseline.statementsPerSec),
            serverCpuPercent: per(loaded.serverCpuPercent, baseline.serverCpuPercent),
          },
          pollerStats: stats.trim(),
        },
        peers: {},
        ratios: {
          'transactions/s with pollers over server alone':
            baseline.transactionsPerSec > 0 ? round(loaded.transactionsPerSec / baseline.transactionsPerSec, 2) : null,
        },
        notes: [
          `${count} raw long-poll loops (register; POST /claims waitMs 30000 in a loop; POST /workers/:id/heartbeat every heartbeatIntervalMs, held by the server for that interval as the agent asks) in a child process.`,
          'transactions: xact_commit + xact_rollback of the bench database in pg_stat_database (PostgreSQL flushes these lazily, up to ~10 s late for idle sessions). statements: counted client-side in the server process (BEGIN/COMMIT included). pg_stat_statements is not used.',
          'server CPU: process.cpuUsage() of the bench process hosting the server, as % of one core.',
          `trickle: one job enqueued every ${TRICKLE_MS} ms through the API while the pollers wait; a poller releases a job it gets at once.`,
        ],
        table: table([
          ['', 'seconds', 'tx/s', 'statements/s', 'server CPU %'],
          [
            'server alone',
            baseline.seconds,
            baseline.transactionsPerSec,
            baseline.statementsPerSec,
            baseline.serverCpuPercent,
          ],
          [
            `${count} idle pollers`,
            loaded.seconds,
            loaded.transactionsPerSec,
            loaded.statementsPerSec,
            loaded.serverCpuPercent,
          ],
          [
            `... and a job every ${TRICKLE_MS} ms`,
            trickled.seconds,
            trickled.transactionsPerSec,
            trickled.statementsPerSec,
            trickled.serverCpuPercent,
          ],
        ]),
      };
    } finally {
      await stopChild(child);
    }
  } finally {
    await sj.close();
    await db.drop();
  }
}
