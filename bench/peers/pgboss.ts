// pg-boss 12 as a peer: runs in this process with noop handlers.
import { PgBoss } from 'pg-boss';
import type { CpuMeter } from '../lib/cpu.js';
import { benchPool } from '../lib/postgres.js';
import { Progress } from '../lib/progress.js';
import { pollUntil, sendPaced, summarize, wallMs, type LatencySummary } from '../lib/stats.js';
import type { DrainResult } from './graphile.js';

export interface PgBossVariant {
  name: string;
  listenNotify?: boolean;
  work: {
    batchSize?: number;
    localConcurrency?: number;
    pollingIntervalSeconds?: number;
    notifyPollingIntervalSeconds?: number;
    burstWhenBatchFull?: boolean;
  };
}

export const pgbossThroughput: PgBossVariant = {
  name: 'batchSize 1000, localConcurrency 2, burstWhenBatchFull, polling 0.5 s',
  work: { batchSize: 1000, localConcurrency: 2, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 },
};
export const pgbossPolling: PgBossVariant = { name: 'default polling (2 s)', work: {} };
export const pgbossNotify: PgBossVariant = {
  name: 'useListenNotify + queue notify, polling 0.5 s',
  listenNotify: true,
  work: { pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: 0.5 },
};

async function startBoss(connectionString: string, v: PgBossVariant, queue: string): Promise<PgBoss> {
  const boss = new PgBoss({ connectionString, useListenNotify: v.listenNotify ?? false, schedule: false });
  boss.on('error', (err) => process.stderr.write(`pg-boss error: ${(err as Error).message}\n`));
  await boss.start();
  await boss.createQueue(queue, { notify: v.listenNotify ?? false });
  return boss;
}

/** n queued noop jobs, then workers drain them: min(started_on) to max(completed_on) in pg-boss's table. */
export async function pgbossDrain(
  connectionString: string,
  n: number,
  v: PgBossVariant,
  cpu?: CpuMeter,
): Promise<DrainResult> {
  const boss = await startBoss(connectionString, v, 'noop');
  const pool = benchPool(connectionString, 1);
  let progress: Progress | null = null;
  try {
    await cpu?.begin(pool);
    const add = new Progress('pg-boss: enqueue', n);
    for (let done = 0; done < n;) {
      const size = Math.min(2000, n - done);
      await boss.insert(
        'noop',
        Array.from({ length: size }, () => ({ data: {} })),
      );
      done += size;
      add.update(done);
    }
    add.done();
    progress = new Progress('pg-boss: drain', n);
    let handled = 0;
    await boss.work('noop', v.work, async (jobs) => {
      handled += jobs.length;
    });
    // Progress from the handler's count, in memory, as for the others; then the table, to the last completion.
    await pollUntil(
      'pg-boss: drain',
      () => {
        progress!.update(handled);
        return handled >= n;
      },
      20,
    );
    await pollUntil(
      'pg-boss: completions',
      async () => {
        const { rows } = await pool.query(
          `SELECT count(*)::int AS n FROM pgboss.job WHERE name = 'noop' AND state = 'completed'`,
        );
        return rows[0].n >= n;
      },
      5,
    );
    progress.update(n);
    cpu?.end();
    progress.done();
    const { rows } = await pool.query(
      `SELECT extract(epoch FROM max(completed_on) - min(started_on))::float8 AS s FROM pgboss.job WHERE name = 'noop'`,
    );
    const seconds = rows[0].s as number;
    return {
      variant: v.name,
      jobs: n,
      seconds: Math.round(seconds * 1000) / 1000,
      jobsPerSec: Math.round(n / seconds),
    };
  } finally {
    progress?.done();
    await boss.stop({ graceful: true, timeout: 5000 });
    await pool.end();
  }
}

/** Single jobs `gapMs` apart into idle workers: send() call to handler start. */
export async function pgbossLatency(
  connectionString: string,
  n: number,
  gapMs: number,
  v: PgBossVariant,
  warmup = 0,
): Promise<LatencySummary & { variant: string }> {
  const boss = await startBoss(connectionString, v, 'lat');
  const samples: number[] = [];
  const progress = new Progress('pg-boss: latency', n + warmup);
  try {
    await boss.work<{ t: number }>('lat', v.work, async (jobs) => {
      const now = wallMs();
      for (const j of jobs) samples.push(now - j.data.t);
    });
    await sendPaced(n + warmup, gapMs, (t) => boss.send('lat', { t }), samples, progress);
  } finally {
    progress.done();
    await boss.stop({ graceful: true, timeout: 5000 });
  }
  return { variant: v.name, ...summarize(samples.slice(warmup)) };
}
