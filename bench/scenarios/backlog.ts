// Backlog: claim latency (POST /claims max 1, then the release) with a small and a huge pending
// backlog, half of it bound to a region the claiming worker is not in.
import { createBenchDatabase } from '../lib/postgres.js';
import { note, Progress } from '../lib/progress.js';
import { ratio, table } from '../lib/results.js';
import { startSkipjack } from '../lib/skipjack.js';
import { summarize, wallMs } from '../lib/stats.js';
import type { ScenarioContext, ScenarioOutput } from './context.js';

async function measure(ctx: ScenarioContext, pending: number, claims: number) {
  const db = await createBenchDatabase(ctx.pg, `sj_backlog_${pending}`);
  const sj = await startSkipjack(db.url);
  try {
    const t0 = wallMs();
    const chunk = 100_000;
    const fill = new Progress(`insert ${pending} pending`, pending);
    // The wake-up trigger is not under test here; it would only fold a million identical NOTIFYs.
    await sj.pool.query('ALTER TABLE jobs DISABLE TRIGGER jobs_notify_insert');
    for (let done = 0; done < pending; done += chunk) {
      const size = Math.min(chunk, pending - done);
      await sj.pool.query(
        `
        INSERT INTO jobs (command, regions)
        SELECT '{/bin/true}', CASE WHEN g % 2 = 0 THEN '{ord}'::text[] ELSE '{mad}'::text[] END
        FROM generate_series($1::int, $2::int) g`,
        [done + 1, done + size],
      );
      fill.update(done + size);
    }
    fill.done();
    await sj.pool.query('ALTER TABLE jobs ENABLE TRIGGER jobs_notify_insert');
    await sj.pool.query('VACUUM ANALYZE jobs');
    note(`  ${pending} pending jobs inserted and analyzed in ${((wallMs() - t0) / 1000).toFixed(1)} s`);
    const worker = await sj.client.register({ name: 'bench-backlog', region: 'mad', capacity: { slots: 1000 } });
    const claimMs: number[] = [];
    const cycleMs: number[] = [];
    const progress = new Progress(`claims (${pending} pending)`, claims);
    const warmup = 10;
    for (let i = 0; i < claims + warmup; i++) {
      const a = wallMs();
      const { jobs } = await sj.client.claim(worker.id, 1, 0);
      const b = wallMs();
      if (jobs.length !== 1) throw new Error(`claim ${i} returned ${jobs.length} jobs`);
      if (jobs[0].command[0] !== '/bin/true') throw new Error('unexpected job');
      await sj.client.release(jobs[0].id, { leaseToken: jobs[0].leaseToken, outcome: 'succeeded', exitCode: 0 });
      const c = wallMs();
      if (i >= warmup) {
        claimMs.push(b - a);
        cycleMs.push(c - a);
        progress.update(i - warmup + 1);
      }
    }
    progress.done();
    const { rows } = await sj.pool.query(
      `SELECT count(*)::int AS n FROM jobs WHERE state = 'succeeded' AND regions = '{ord}'`,
    );
    if (rows[0].n !== 0) throw new Error(`${rows[0].n} jobs bound to ord ran on a mad worker`);
    return { pending, claim: summarize(claimMs), claimAndRelease: summarize(cycleMs) };
  } finally {
    await sj.close();
    await db.drop();
  }
}

export async function backlog(ctx: ScenarioContext): Promise<ScenarioOutput> {
  const sizes = ctx.quick ? [10_000, 100_000] : [10_000, 1_000_000];
  const claims = 200;
  const runs = [];
  for (const size of sizes) {
    const r = await measure(ctx, size, claims);
    note(`${size} pending: claim p50 ${r.claim.p50Ms} ms, p99 ${r.claim.p99Ms} ms`);
    runs.push(r);
  }
  const [small, big] = runs;
  const key = (n: number) => (n >= 1_000_000 ? `${n / 1_000_000}M` : `${n / 1000}k`);
  return {
    skipjack: { claims, runs },
    peers: {},
    ratios: {
      [`claim p50 ${key(big.pending)}/${key(small.pending)}`]: ratio(big.claim.p50Ms, small.claim.p50Ms),
      [`claim p99 ${key(big.pending)}/${key(small.pending)}`]: ratio(big.claim.p99Ms, small.claim.p99Ms),
      [`claim+release p50 ${key(big.pending)}/${key(small.pending)}`]: ratio(
        big.claimAndRelease.p50Ms,
        small.claimAndRelease.p50Ms,
      ),
    },
    notes: [
      'Pending jobs inserted with INSERT ... SELECT generate_series, half with regions {ord}, half {mad}; the claiming worker is in mad (slots 1000).',
      `${claims} sequential POST /claims {max: 1, waitMs: 0}, each followed by POST /jobs/:id/release, after 10 warm-up cycles. Ratios here are big backlog over small backlog (1 = no slowdown).`,
    ],
    table: table([
      ['pending', 'claim p50', 'claim p99', 'claim max', 'claim+release p50', 'claim+release p99'],
      ...runs.map((r) => [
        r.pending,
        r.claim.p50Ms,
        r.claim.p99Ms,
        r.claim.maxMs,
        r.claimAndRelease.p50Ms,
        r.claimAndRelease.p99Ms,
      ]),
    ]),
  };
}
