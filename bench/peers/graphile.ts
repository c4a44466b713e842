// graphile-worker 0.18 as a peer: runs in this process with in-memory noop tasks.
import { Logger, makeWorkerUtils, run, runMigrations, type Runner, type WorkerUtils } from 'graphile-worker';
import pg from 'pg';
import type { CpuMeter } from '../lib/cpu.js';
import { benchPool } from '../lib/postgres.js';
import { Progress } from '../lib/progress.js';
import { pollUntil, sendPaced, summarize, wallMs, type LatencySummary } from '../lib/stats.js';

const silent = new Logger(() => () => {});

export interface GraphileVariant {
  name: string;
  /** Merged into the preset's worker options (localQueue, completeJobBatchDelay, ...). */
  worker?: GraphileConfig.WorkerOptions;
  concurrency?: number;
}

export const graphileDefault: GraphileVariant = { name: 'default, concurrency 24', concurrency: 24 };
export const graphileBatched: GraphileVariant = {
  name: 'localQueue 500, batch delays 0, concurrency 24',
  concurrency: 24,
  worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 },
};

/**
 * A pool of ours for graphile-worker, ended by us before the database is dropped: with its own,
 * a connection it still held when the drop terminated it once crashed the benchmark.
 */
const ownPool = (connectionString: string) => benchPool(connectionString, 10); // graphile-worker's own default

async function utils(pgPool: pg.Pool): Promise<WorkerUtils> {
  await runMigrations({ pgPool, logger: silent });
  return makeWorkerUtils({ pgPool, logger: silent });
}

function startRunner(
  pgPool: pg.Pool,
  v: GraphileVariant,
  taskList: Record<string, (payload: unknown) => Promise<void>>,
): Promise<Runner> {
  return run({
    pgPool,
    concurrency: v.concurrency ?? 1,
    noHandleSignals: true,
    logger: silent,
    taskList,
    preset: { worker: { ...v.worker } },
  });
}

export interface DrainResult {
  variant: string;
  jobs: number;
  seconds: number;
  jobsPerSec: number;
}

/** n queued noop jobs, then a runner drains them: first task start to the last job gone from the table. */
export async function graphileDrain(
  connectionString: string,
  n: number,
  v: GraphileVariant,
  cpu?: CpuMeter,
): Promise<DrainResult> {
  const own = ownPool(connectionString);
  const wu = await utils(own);
  await cpu?.begin(own);
  const add = new Progress(`graphile: enqueue`, n);
  for (let done = 0; done < n;) {
    const size = Math.min(2000, n - done);
    await wu.addJobs(Array.from({ length: size }, () => ({ identifier: 'noop', payload: {} })));
    done += size;
    add.update(done);
  }
  add.done();
  let first = 0;
  let handled = 0;
  const progress = new Progress(`graphile: drain`, n);
  const runner = await startRunner(own, v, {
    noop: async () => {
      if (handled++ === 0) first = wallMs();
    },
  });
  const pool = benchPool(connectionString, 1);
  let end: number;
  try {
    await pollUntil(
      'graphile: drain',
      () => {
        progress.update(handled);
        return handled >= n;
      },
      20,
    );
    // Completions may be batched after the task returns: the job is done when its row is gone.
    await pollUntil(
      'graphile: completions',
      async () => {
        const { rows } = await pool.query('SELECT count(*)::int AS n FROM graphile_worker._private_jobs');
        return rows[0].n === 0;
      },
      2,
    );
    end = wallMs();
    cpu?.end();
    progress.update(n);
  } finally {
    progress.done();
    await runner.stop();
    await wu.release();
    await pool.end();
    await own.end();
  }
  const seconds = (end - first) / 1000;
  return { variant: v.name, jobs: n, seconds: Math.round(seconds * 1000) / 1000, jobsPerSec: Math.round(n / seconds) };
}

/** Single jobs `gapMs` apart into an idle runner: addJob call to task start; the first `warmup` are not counted. */
export async function graphileLatency(
  connectionString: string,
  n: number,
  gapMs: number,
  v: GraphileVariant,
  warmup = 0,
): Promise<LatencySummary & { variant: string }> {
  const own = ownPool(connectionString);
  const wu = await utils(own);
  const samples: number[] = [];
  const runner = await startRunner(own, v, {
    lat: async (payload) => {
      samples.push(wallMs() - (payload as { t: number }).t);
    },
  });
  const progress = new Progress('graphile: latency', n + warmup);
  try {
    await sendPaced(n + warmup, gapMs, (t) => wu.addJob('lat', { t }), samples, progress);
  } finally {
    progress.done();
    await runner.stop();
    await wu.release();
    await own.end();
  }
  return { variant: v.name, ...summarize(samples.slice(warmup)) };
}
