// Retention: how fast a backlog of expired finished jobs (each with a run and a line of output)
// is deleted, against the rate the throughput scenario finishes jobs; and what it costs claims
// (POST /claims then the release, one at a time) while it runs, against the same claims idle.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { createDb } from '../../server/db.js';
import { startRetention } from '../../server/loops/retention.js';
import { createBenchDatabase } from '../lib/postgres.js';
import { note, Progress } from '../lib/progress.js';
import { ratio, table } from '../lib/results.js';
import { benchRoot, startSkipjack, type Skipjack } from '../lib/skipjack.js';
import { round, summarize, wallMs } from '../lib/stats.js';
import type { ScenarioContext, ScenarioOutput } from './context.js';

async function fillExpired(sj: Skipjack, total: number) {
  const chunk = 100_000;
  const fill = new Progress(`insert ${total} expired jobs`, total);
  for (let done = 0; done < total; done += chunk) {
    const size = Math.min(chunk, total - done);
    await sj.pool.query(
      `WITH ins AS (
         INSERT INTO jobs (queue, command, state, attempts, runs, finished_at)
         SELECT 'done', '{/bin/true}', 'succeeded', 1, 1, now() - interval '2 days' FROM generate_series(1, $1::int)
         RETURNING id
       ), runs AS (INSERT INTO job_attempts (job_id, attempt, outcome) SELECT id, 1, 'succeeded' FROM ins)
       INSERT INTO job_logs (job_id, attempt, byte_offset, stream, data) SELECT id, 1, 0, 'stdout', 'ok\n' FROM ins`,
      [size],
    );
    fill.update(done + size);
  }
  fill.done();
  await sj.pool.query('VACUUM ANALYZE jobs, job_attempts, job_logs');
}

/** Claim-and-release cycles, one at a time, until `until` says stop (or `count` are done). */
async function claimCycles(sj: Skipjack, workerId: string, stop: { count?: number; until?: () => boolean }) {
  const ms: number[] = [];
  while (stop.count !== undefined ? ms.length < stop.count : !stop.until!()) {
    const a = wallMs();
    const { jobs } = await sj.client.claim(workerId, 1, 0);
    if (jobs.length !== 1) throw new Error(`claim returned ${jobs.length} jobs`);
    await sj.client.release(jobs[0].id, { leaseToken: jobs[0].leaseToken, outcome: 'succeeded', exitCode: 0 });
    ms.push(wallMs() - a);
  }
  return ms;
}

/** The throughput scenario's jobs/s from this run's results, if it ran. */
function throughputOfThisRun(quick: boolean, since: number): number | undefined {
  const file = join(benchRoot, 'results', `throughput${quick ? '.quick' : ''}.json`);
  if (!existsSync(file)) return undefined;
  const result = JSON.parse(readFileSync(file, 'utf8')) as { date: string; skipjack: { jobsPerSec: number } };
  return Date.parse(result.date) >= since ? result.skipjack.jobsPerSec : undefined;
}

const benchStartedAt = Date.now();

export async function retention(ctx: ScenarioContext): Promise<ScenarioOutput> {
  const expired = ctx.quick ? 100_000 : 1_000_000;
  const db = await createBenchDatabase(ctx.pg, 'sj_retention');
  const sj = await startSkipjack(db.url, { retentionMs: 0 });
  const kdb = createDb(db.url, 2).db;
  try {
    await fillExpired(sj, expired);
    await sj.pool.query(
      `INSERT INTO jobs (queue, command) SELECT 'live', '{/bin/true}' FROM generate_series(1, 50000)`,
    );
    await sj.pool.query('ANALYZE jobs');
    const worker = await sj.client.register({ name: 'bench-retention', queues: ['live'], capacity: { slots: 1000 } });
    await claimCycles(sj, worker.id, { count: 50 }); // warm-up
    const idle = summarize(await claimCycles(sj, worker.id, { count: 500 }));
    const remaining = async () =>
      Number((await sj.pool.query(`SELECT count(*)::int AS n FROM jobs WHERE queue = 'done'`)).rows[0].n);
    const t0 = wallMs();
    const loop = startRetention(
      kdb,
      pino({ level: 'silent' }),
      { jobsMs: 3_600_000, workersMs: 0 },
      { intervalMs: 3_600_000, firstTickMs: 0 },
    );
    let left = expired;
    const progress = new Progress('retention deleting', expired);
    const watcher = (async () => {
      while (left > 0) {
        left = await remaining();
        progress.update(expired - left);
        if (left > 0) await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const during = summarize(await claimCycles(sj, worker.id, { until: () => left === 0 }));
    await watcher;
    const seconds = (wallMs() - t0) / 1000;
    progress.done();
    await loop.stop();
    const deletedPerSec = Math.round(expired / seconds);
    const finishing = throughputOfThisRun(ctx.quick, benchStartedAt);
    note(
      `  ${expired} deleted in ${seconds.toFixed(1)} s (${deletedPerSec} jobs/s); claim p50 ${idle.p50Ms} → ${during.p50Ms} ms`,
    );
    return {
      skipjack: { expired, seconds: round(seconds), deletedPerSec, claimIdle: idle, claimDuringRetention: during },
      peers: {},
      ratios: {
        'deleted/s over throughput jobs/s': ratio(deletedPerSec, finishing),
        'claim p50 during/idle': ratio(during.p50Ms, idle.p50Ms),
        'claim p99 during/idle': ratio(during.p99Ms, idle.p99Ms),
      },
      notes: [
        `${expired} succeeded jobs finished two days ago, each with a run and one line of output, deleted by the server's retention loop (batches of their own transactions, one after another).`,
        'deleted/s over throughput jobs/s: the throughput scenario of this same run (null when it did not run first); above 1, retention keeps pace with the fastest drain.',
        'Claims: POST /claims {max: 1} then the release, one at a time, 500 with retention idle, then as many as fit while it runs.',
      ],
      table: table([
        [
          'expired jobs',
          'seconds',
          'deleted/s',
          'claim p50 idle',
          'claim p50 during',
          'claim p99 idle',
          'claim p99 during',
        ],
        [expired, round(seconds), deletedPerSec, idle.p50Ms, during.p50Ms, idle.p99Ms, during.p99Ms],
      ]),
    };
  } finally {
    await kdb.destroy();
    await sj.close();
    await db.drop();
  }
}
