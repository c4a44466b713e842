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
      const workers = await startWorkers(sj.server.url, c.processes, c.slots, {
        nodeArgs: childProfileArgs(ctx.profileDir, `worker-${label}`),
      });
      const cpu = new CpuMeter();
      try {
        await insertBacklog(sj.pool, n, ['true']);
        await waitTerminal(sj, n, `skipjack ${label}: warm-up`);
        await sj.pool.query('TRUNCATE jobs, job_attempts, job_logs');
        await cpu.begin(
          sj.pool,
          workers.procs.map((p) => p.pid!),
        );
        await insertBacklog(sj.pool, n, ['true']);
        await waitTerminal(sj, n, `skipjack ${label}: drain`);
        cpu.end();
      } finally {
        await workers.stop();
      }
      return {
        config: `${c.processes} process${c.processes > 1 ? 'es' : ''} x ${c.slots} slots`,
        ...(await drainSpan(sj.pool)),
        cpuUsPerJob: perJob(cpu.use, n),
      };
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
  // A drain of 20,000 jobs lasts under a second, and one system's speed moves by a fifth from one
  // minute to the next on this VM: each is measured in every round, the rounds interleaved, and
  // each compared by its median.
  const rounds = ctx.quick ? 1 : 3;
  // 1,000 slots: a request claims, and carries, at most that many (MAX_BATCH).
  const configs: SkipjackConfig[] = ctx.quick
    ? [
        { processes: 1, slots: 1000 },
        { processes: 2, slots: 1000 },
      ]
    : [
        { processes: 1, slots: 1000 },
        { processes: 2, slots: 1000 },
        { processes: 3, slots: 1000 },
      ];
  // Each peer variant drains a warm-up backlog on a database of its own first, as Skipjack's workers do.
  const measured = async (
    label: string,
    drain: (url: string, jobs: number, cpu?: CpuMeter) => Promise<DrainResult>,
  ): Promise<Run> => {
    await withBenchDatabase(ctx.pg, `${label}_warm`, (url) => drain(url, n));
    const cpu = new CpuMeter();
    const r = await withBenchDatabase(ctx.pg, label, (url) => drain(url, n, cpu));
    return { ...r, name: r.variant, cpuUsPerJob: perJob(cpu.use, n) };
  };
  // Alternate: a Skipjack config, then a peer variant, and so on, each on a fresh database.
  const steps: [string, () => Promise<Run>][] = [];
  const peerSteps: [string, () => Promise<Run>][] = [
    [
      'graphile-worker',
      () => measured('gw_default', (url, jobs, cpu) => graphileDrain(url, jobs, graphileDefault, cpu)),
    ],
    ['pg-boss', () => measured('pgboss', (url, jobs, cpu) => pgbossDrain(url, jobs, pgbossThroughput, cpu))],
    [
      'graphile-worker',
      () => measured('gw_batched', (url, jobs, cpu) => graphileDrain(url, jobs, graphileBatched, cpu)),
    ],
  ];
  for (let i = 0; i < Math.max(configs.length, peerSteps.length); i++) {
    if (configs[i])
      steps.push([
        'skipjack',
        async () => {
          const r = await skipjackDrain(ctx, n, configs[i]);
          return { ...r, name: r.config };
        },
      ]);
    if (peerSteps[i]) steps.push(peerSteps[i]);
  }
  const runs = await inRounds(steps, rounds);
  const best = Object.fromEntries(Object.entries(runs).map(([system, xs]) => [system, bestByMedian(system, xs)]));
  const summary = (b: Median) => ({
    jobsPerSec: b.median.jobsPerSec,
    seconds: b.median.seconds,
    best: b.name,
    spread: b.spread,
    runs: runs[b.system],
  });
  const peers: ScenarioOutput['peers'] = {};
  const ratios: ScenarioOutput['ratios'] = {};
  for (const peer of ['graphile-worker', 'pg-boss']) {
    peers[peer] = summary(best[peer]);
    ratios[`jobsPerSec vs ${peer}`] = ratio(best.skipjack.median.jobsPerSec, best[peer].median.jobsPerSec);
  }
  return {
    skipjack: summary(best.skipjack),
    peers,
    ratios,
    notes: [
      `${n} noop jobs queued before the clock starts, after each system drained as many to warm up. Skipjack: min(started_at) to max(finished_at) in the jobs table, workers are separate processes over HTTP (executor 'noop'), started and warmed up before the backlog is stored in one statement (the warm-up's rows truncated), so that no worker's start-up falls inside the drain.`,
      'graphile-worker: first task start to its last row leaving _private_jobs; pg-boss: min(started_on) to max(completed_on). Both run in the bench process.',
      `${rounds} round${rounds > 1 ? 's' : ''}, each measuring every Skipjack config and every peer variant in turn; each system is represented by its config or variant with the best median, and the ratios compare medians. CPU us/job is the median run's.`,
      'CPU us/job: CPU time from the enqueue to the last job done, over the jobs, from /proc: PostgreSQL (when on this machine), the bench process (the Skipjack server, or the peer), the worker processes. With every core busy, jobs/s follow it.',
    ],
    table: tableOf(runs),
  };
}

/** Every step once per round, in order: each system's runs. */
async function inRounds(steps: [string, () => Promise<Run>][], rounds: number): Promise<Record<string, Run[]>> {
  const runs: Record<string, Run[]> = {};
  for (let round = 1; round <= rounds; round++) {
    for (const [system, step] of steps) {
      const r = await step();
      note(
        `${rounds > 1 ? `round ${round}/${rounds}: ` : ''}${system} ${r.name}: ${r.jobsPerSec} jobs/s (${r.seconds} s)`,
      );
      (runs[system] ??= []).push(r);
    }
  }
  return runs;
}

/** One row per config or variant: its median, its range, and its median run's CPU per job. */
function tableOf(runs: Record<string, Run[]>): string {
  const rows: (string | number)[][] = [
    [
      'system / config',
      'runs',
      'jobs/s (median)',
      'min-max',
      'CPU us/job: postgres',
      'bench process',
      'workers',
      'all',
    ],
  ];
  // Whole microseconds: the table would print 50 as 50.0.
  const cpuCells = (c: ReturnType<typeof perJob>) =>
    [c?.postgres, c?.bench, c?.workers, c?.total].map((v) => (v === null || v === undefined ? '-' : String(v)));
  for (const [system, xs] of Object.entries(runs)) {
    for (const m of mediansByName(system, xs))
      rows.push([
        `${system} ${m.name}`,
        m.count,
        m.median.jobsPerSec,
        m.spread.join('-'),
        ...cpuCells(m.median.cpuUsPerJob),
      ]);
  }
  return table(rows);
}

type Run = { name: string; jobs: number; seconds: number; jobsPerSec: number; cpuUsPerJob: ReturnType<typeof perJob> };
interface Median {
  system: string;
  name: string;
  count: number;
  median: Run;
  spread: [number, number];
}

/** Per config or variant: its median run (the lower middle one of an even count) and its range. */
function mediansByName(system: string, runs: Run[]): Median[] {
  const names = [...new Set(runs.map((r) => r.name))];
  return names.map((name) => {
    const xs = runs.filter((r) => r.name === name).sort((a, b) => a.jobsPerSec - b.jobsPerSec);
    return {
      system,
      name,
      count: xs.length,
      median: xs[Math.floor((xs.length - 1) / 2)],
      spread: [xs[0].jobsPerSec, xs[xs.length - 1].jobsPerSec],
    };
  });
}

const bestByMedian = (system: string, runs: Run[]): Median =>
  mediansByName(system, runs).reduce((a, b) => (b.median.jobsPerSec > a.median.jobsPerSec ? b : a));
