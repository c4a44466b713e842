// Throughput: a queued backlog of noop jobs drained by real worker processes over HTTP, against
// graphile-worker and pg-boss draining the same number of noop jobs on the same PostgreSQL.
import { graphileBatched, graphileDefault, graphileDrain, type DrainResult } from '../peers/graphile.js';
import { pgbossDrain, pgbossThroughput } from '../peers/pgboss.js';
import { createBenchDatabase, withBenchDatabase } from '../lib/postgres.js';
import { childProfileArgs, profiled } from '../lib/profile.js';
import { note } from '../lib/progress.js';
import { CpuMeter, perJob } from '../lib/cpu.js';
import { ratio, table } from '../lib/results.js';
import { drainSpan, insertBacklog, startSkipjack, startWorkers, waitTerminal } from '../lib/skipjack.js';
import type { ScenarioContext, ScenarioOutput } from './context.js';

interface SkipjackConfig {
  processes: number;
  slots: number;
}

async function skipjackDrain(ctx: ScenarioContext, n: number, c: SkipjackConfig) {
  const label = `${c.processes}x${c.slots}`;
  const db = await createBenchDatabase(ctx.pg, `sj_tp_${label}`);
  const sj = await startSkipjack(db.url);
  try {
    return await profiled(ctx.profileDir, `throughput-${label}`, async () => {
      const workers = await startWorkers(sj.server.url, c.processes, c.slots, { nodeArgs: childProfileArgs(ctx.profileDir, `worker-${label}`) });
      const cpu = new CpuMeter();
      try {
        await insertBacklog(sj.pool, n, ['true']);
        await waitTerminal(sj, n, `skipjack ${label}: warm-up`);
        await sj.pool.query('TRUNCATE jobs, job_attempts, job_logs');
        await cpu.begin(sj.pool, workers.procs.map((p) => p.pid!));
        await insertBacklog(sj.pool, n, ['true']);
        await waitTerminal(sj, n, `skipjack ${label}: drain`);
        cpu.end();
      } finally {
        await workers.stop();
      }
      return { config: `${c.processes} process${c.processes > 1 ? 'es' : ''} x ${c.slots} slots`, ...(await drainSpan(sj.pool)), cpuUsPerJob: perJob(cpu.use, n) };
    });
  } finally {
    await sj.close();
    await db.drop();
  }
}

/**
 * Every system first drains as many jobs as are then measured, unmeasured: compiled code, not the
 * first seconds of a fresh process, is what runs a long drain. Skipjack's workers start anew for
 * each configuration, and a worker runs its per-request code once per thousand jobs, so that code
 * is compiled late: after a warm-up of a quarter of the backlog (5,000 jobs) the workers spent
 * 23-25 us of CPU per job, after 20,000 13-14 us (probe runs, 2 workers, 20,000 jobs measured).
 */
export async function throughput(ctx: ScenarioContext): Promise<ScenarioOutput> {
  const n = ctx.quick ? 5_000 : 20_000;
  // 1,000 slots: a request claims, and carries, at most that many (MAX_BATCH).
  const configs: SkipjackConfig[] = ctx.quick
    ? [{ processes: 1, slots: 1000 }, { processes: 2, slots: 1000 }]
    : [{ processes: 1, slots: 1000 }, { processes: 2, slots: 1000 }, { processes: 3, slots: 1000 }];
  const sjRuns: Awaited<ReturnType<typeof skipjackDrain>>[] = [];
  type PeerRun = DrainResult & { cpuUsPerJob: ReturnType<typeof perJob> };
  const peerRuns: Record<string, PeerRun[]> = { 'graphile-worker': [], 'pg-boss': [] };
  // Each peer variant drains a warm-up backlog on a database of its own first, as Skipjack's workers do.
  const measured = async (label: string, drain: (url: string, jobs: number, cpu?: CpuMeter) => Promise<DrainResult>): Promise<PeerRun> => {
    await withBenchDatabase(ctx.pg, `${label}_warm`, (url) => drain(url, n));
    const cpu = new CpuMeter();
    const r = await withBenchDatabase(ctx.pg, label, (url) => drain(url, n, cpu));
    return { ...r, cpuUsPerJob: perJob(cpu.use, n) };
  };
  // Alternate: a Skipjack config, then a peer variant, and so on, each on a fresh database.
  const peerSteps: [string, () => Promise<PeerRun>][] = [
    ['graphile-worker', () => measured('gw_default', (url, jobs, cpu) => graphileDrain(url, jobs, graphileDefault, cpu))],
    ['pg-boss', () => measured('pgboss', (url, jobs, cpu) => pgbossDrain(url, jobs, pgbossThroughput, cpu))],
    ['graphile-worker', () => measured('gw_batched', (url, jobs, cpu) => graphileDrain(url, jobs, graphileBatched, cpu))],
  ];
  const rounds = Math.max(configs.length, peerSteps.length);
  for (let i = 0; i < rounds; i++) {
    if (configs[i]) {
      const r = await skipjackDrain(ctx, n, configs[i]);
      note(`skipjack ${r.config}: ${r.jobsPerSec} jobs/s (${r.seconds} s)`);
      sjRuns.push(r);
    }
    if (peerSteps[i]) {
      const [peer, step] = peerSteps[i];
      const r = await step();
      note(`${peer} ${r.variant}: ${r.jobsPerSec} jobs/s (${r.seconds} s)`);
      peerRuns[peer].push(r);
    }
  }
  const best = <T extends { jobsPerSec: number }>(xs: T[]) => xs.reduce((a, b) => (b.jobsPerSec > a.jobsPerSec ? b : a));
  const sjBest = best(sjRuns);
  const peers: ScenarioOutput['peers'] = {};
  const ratios: ScenarioOutput['ratios'] = {};
  for (const [peer, runs] of Object.entries(peerRuns)) {
    const b = best(runs);
    peers[peer] = { jobsPerSec: b.jobsPerSec, seconds: b.seconds, best: b.variant, runs };
    ratios[`jobsPerSec vs ${peer}`] = ratio(sjBest.jobsPerSec, b.jobsPerSec);
  }
  const rows: (string | number)[][] = [['system / config', 'jobs', 'seconds', 'jobs/s', 'CPU us/job: postgres', 'bench process', 'workers', 'all']];
  // Whole microseconds: the table would print 50 as 50.0.
  const cpuCells = (c: ReturnType<typeof perJob>) => [c?.postgres, c?.bench, c?.workers, c?.total].map((v) => (v === null || v === undefined ? '-' : String(v)));
  for (const r of sjRuns) rows.push([`skipjack ${r.config}`, r.jobs, r.seconds, r.jobsPerSec, ...cpuCells(r.cpuUsPerJob)]);
  for (const [peer, runs] of Object.entries(peerRuns)) for (const r of runs) rows.push([`${peer} ${r.variant}`, r.jobs, r.seconds, r.jobsPerSec, ...cpuCells(r.cpuUsPerJob)]);
  return {
    skipjack: { jobsPerSec: sjBest.jobsPerSec, seconds: sjBest.seconds, best: sjBest.config, runs: sjRuns },
    peers,
    ratios,
    notes: [
      `${n} noop jobs queued before the clock starts, after each system drained as many to warm up. Skipjack: min(started_at) to max(finished_at) in the jobs table, workers are separate processes over HTTP (executor 'noop'), started and warmed up before the backlog is stored in one statement (the warm-up's rows truncated), so that no worker's start-up falls inside the drain.`,
      'graphile-worker: first task start to its last row leaving _private_jobs; pg-boss: min(started_on) to max(completed_on). Both run in the bench process.',
      'CPU us/job: CPU time from the enqueue to the last job done, over the jobs, from /proc: PostgreSQL (when on this machine), the bench process (the Skipjack server, or the peer), the worker processes. With every core busy, jobs/s follow it.',
    ],
    table: table(rows),
  };
}
