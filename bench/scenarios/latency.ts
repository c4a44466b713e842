// Latency: single jobs enqueued gapMs apart into an idle system, from the enqueue call to the
// executor's start. Skipjack's worker is a real process over HTTP; it reports when each claim
// answer arrives, which is when its noop executor starts the job.
import { graphileLatency, type GraphileVariant } from '../peers/graphile.js';
import { pgbossLatency, pgbossNotify, pgbossPolling } from '../peers/pgboss.js';
import { createBenchDatabase, withBenchDatabase } from '../lib/postgres.js';
import { note, Progress } from '../lib/progress.js';
import { ratio, table } from '../lib/results.js';
import { startSkipjack, startWorkers, type WorkerProcs } from '../lib/skipjack.js';
import { sleep, summarize, wallMs, type LatencySummary } from '../lib/stats.js';
import type { ScenarioContext, ScenarioOutput } from './context.js';

const graphileDefaults: GraphileVariant = { name: 'defaults (LISTEN/NOTIFY, pollInterval 2 s, concurrency 1)' };

async function skipjackLatency(ctx: ScenarioContext, n: number, gapMs: number, warmup: number) {
  const db = await createBenchDatabase(ctx.pg, 'sj_latency');
  const sj = await startSkipjack(db.url);
  const starts = new Map<number, number>();
  const enqueued = new Map<number, number>();
  let workers: WorkerProcs | undefined;
  const progress = new Progress('skipjack: latency', n + warmup);
  try {
    workers = await startWorkers(sj.server.url, 1, 16, {
      extraArgs: ['--record-starts'],
      onStdout: (line) => {
        const [tag, id, t] = line.split(' ');
        if (tag === 'start') starts.set(Number(id), Number(t));
      },
    });
    await sleep(500);
    const t0 = wallMs();
    for (let i = 0; i < n + warmup; i++) {
      const wait = t0 + i * gapMs - wallMs();
      if (wait > 0) await sleep(wait);
      const t = wallMs();
      const job = await sj.client.enqueue({ command: ['true'] });
      if (i >= warmup) enqueued.set(job.id, t);
      progress.update(starts.size);
    }
    const deadline = Date.now() + 30_000;
    while (starts.size < n + warmup && Date.now() < deadline) await sleep(20);
    progress.update(starts.size);
    progress.done();
    const { rows } = await sj.pool.query(
      `SELECT id, extract(epoch FROM started_at)::float8 * 1000 AS started FROM jobs WHERE started_at IS NOT NULL`,
    );
    const toStart: number[] = [];
    const toClaim: number[] = [];
    for (const [id, t] of enqueued) {
      const s = starts.get(id);
      if (s !== undefined) toStart.push(s - t);
    }
    for (const r of rows as { id: number; started: number }[]) {
      const t = enqueued.get(r.id);
      if (t !== undefined) toClaim.push(r.started - t);
    }
    return { executorStart: summarize(toStart), dbStartedAt: summarize(toClaim) };
  } finally {
    progress.done();
    await workers?.stop();
    await sj.close();
    await db.drop();
  }
}

export async function latency(ctx: ScenarioContext): Promise<ScenarioOutput> {
  const n = ctx.quick ? 100 : 300;
  const gapMs = 20;
  // Every system's first jobs pay for cold caches, JIT and new connections; none of them counts.
  // 200, not 20: after 20 jobs, code that runs once a job is not yet compiled by V8's optimizer
  // (Skipjack's p50 was 0.5 ms lower after 600 than after 20 in a probe).
  const warmup = 200;
  const sj = await skipjackLatency(ctx, n, gapMs, warmup);
  note(`skipjack: p50 ${sj.executorStart.p50Ms} ms, p99 ${sj.executorStart.p99Ms} ms`);
  const gw = await withBenchDatabase(ctx.pg, 'gw_latency', (url) =>
    graphileLatency(url, n, gapMs, graphileDefaults, warmup),
  );
  note(`graphile-worker: p50 ${gw.p50Ms} ms, p99 ${gw.p99Ms} ms`);
  const pbPoll = await withBenchDatabase(ctx.pg, 'pgboss_lat_poll', (url) =>
    pgbossLatency(url, n, gapMs, pgbossPolling, warmup),
  );
  note(`pg-boss ${pbPoll.variant}: p50 ${pbPoll.p50Ms} ms`);
  const pbNotify = await withBenchDatabase(ctx.pg, 'pgboss_lat_notify', (url) =>
    pgbossLatency(url, n, gapMs, pgbossNotify, warmup),
  );
  note(`pg-boss ${pbNotify.variant}: p50 ${pbNotify.p50Ms} ms`);
  // A variant that finished no counted job (polling every 2 s may not, in the time given) is not a candidate.
  const pbBest = !(pbPoll.n > 0) || pbNotify.p50Ms <= pbPoll.p50Ms ? pbNotify : pbPoll;
  const row = (name: string, s: LatencySummary) => [name, s.n, s.p50Ms, s.p90Ms, s.p99Ms, s.maxMs];
  return {
    skipjack: { ...sj.executorStart, dbStartedAt: sj.dbStartedAt },
    peers: {
      'graphile-worker': { ...gw },
      'pg-boss': { ...pbBest, runs: [pbPoll, pbNotify] },
    },
    ratios: {
      'p50 vs graphile-worker': ratio(sj.executorStart.p50Ms, gw.p50Ms),
      'p99 vs graphile-worker': ratio(sj.executorStart.p99Ms, gw.p99Ms),
      'p50 vs pg-boss (best variant)': ratio(sj.executorStart.p50Ms, pbBest.p50Ms),
      'p99 vs pg-boss (best variant)': ratio(sj.executorStart.p99Ms, pbBest.p99Ms),
    },
    notes: [
      `${n} single jobs ${gapMs} ms apart into an idle system, after ${warmup} uncounted warm-up jobs (for every system); enqueue call (client wall clock) to executor start (worker wall clock, same machine).`,
      'skipjack: 1 noop worker process, 16 slots, long-poll 30 s; dbStartedAt is the same against the jobs.started_at column (claim transaction time).',
    ],
    table: table([
      ['system / variant', 'n', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'],
      row('skipjack (executor start)', sj.executorStart),
      row('skipjack (started_at in db)', sj.dbStartedAt),
      row(`graphile-worker ${gw.variant}`, gw),
      row(`pg-boss ${pbPoll.variant}`, pbPoll),
      row(`pg-boss ${pbNotify.variant}`, pbNotify),
    ]),
  };
}
