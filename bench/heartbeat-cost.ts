// What heartbeats cost the database: one worker holding N running jobs heartbeats R times (the
// statement the server runs, one transaction each), on a fresh database of the bench's PostgreSQL.
//   node --import tsx bench/heartbeat-cost.ts [--leases 2000] [--rounds 100]
// Prints the median time per heartbeat, the backend's CPU per lease (from /proc, so Linux and a
// PostgreSQL on this machine), the share of updates made in place (HOT) and the table's size.
import { sql } from 'kysely';
import { createDb, migrateToLatest } from '../server/db.js';
import { workerHeartbeats } from '../server/store/workers.js';
import { processCpuMs } from './lib/cpu.js';
import { createBenchDatabase, openPostgres } from './lib/postgres.js';
import { Progress } from './lib/progress.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const leaseCount = arg('leases', 2000);
const rounds = arg('rounds', 100);
const pgs = await openPostgres((s) => process.stderr.write(`${s}\n`));
const bench = await createBenchDatabase(pgs, 'heartbeat_cost');
const { db, pool } = createDb(bench.url, 1);
try {
  await migrateToLatest(db);
  const worker = (
    await pool.query(
      `INSERT INTO workers (name, cpu, memory_mb, disk_mb, slots) VALUES ('bench', 0, 0, 0, $1) RETURNING id`,
      [leaseCount],
    )
  ).rows[0].id as string;
  await pool.query(`INSERT INTO jobs (command) SELECT '{true}'::text[] FROM generate_series(1, $1::int)`, [leaseCount]);
  const claimed = (await pool.query(`SELECT id, lease_token FROM skipjack_claim($1, $2, 60000)`, [worker, leaseCount]))
    .rows;
  const leases = claimed.map((r) => ({ jobId: Number(r.id), leaseToken: r.lease_token as string }));
  const backend = (await pool.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
  // This connection's counts not yet reported to the statistics, read in the heartbeat's own
  // transaction: a report in between would reset them.
  const counters = async (trx: typeof db) =>
    (
      await sql<{ updated: number; hot: number }>`
    SELECT pg_stat_get_xact_tuples_updated('jobs'::regclass)::int AS updated,
           pg_stat_get_xact_tuples_hot_updated('jobs'::regclass)::int AS hot`.execute(trx)
    ).rows[0];
  let updated = 0;
  let hot = 0;
  const times: number[] = [];
  const progress = new Progress('heartbeats', rounds);
  const cpuBefore = processCpuMs(backend);
  for (let i = 0; i < rounds; i++) {
    await db.transaction().execute(async (trx) => {
      const before = await counters(trx);
      const start = performance.now();
      await workerHeartbeats(trx, [{ workerId: worker, leases }], 60_000);
      times.push(performance.now() - start);
      const after = await counters(trx);
      updated += after.updated - before.updated;
      hot += after.hot - before.hot;
    });
    progress.update(i + 1);
  }
  progress.done();
  const cpuAfter = processCpuMs(backend);
  const size = (await pool.query(`SELECT pg_size_pretty(pg_table_size('jobs')) AS size`)).rows[0].size as string;
  times.sort((a, b) => a - b);
  process.stdout.write(
    [
      `${rounds} heartbeats of ${leaseCount} leases (PostgreSQL ${pgs.version}, ${pgs.source})`,
      `  median per heartbeat: ${times[times.length >> 1].toFixed(1)} ms`,
      cpuBefore === null || cpuAfter === null
        ? '  backend CPU per lease: not measured (PostgreSQL runs elsewhere)'
        : `  backend CPU per lease: ${(((cpuAfter - cpuBefore) * 1000) / (leaseCount * rounds)).toFixed(1)} us`,
      `  updated in place (HOT): ${hot} of ${updated} (${Math.round((100 * hot) / Math.max(updated, 1))}%)`,
      `  jobs table at the end: ${size}`,
    ].join('\n') + '\n',
  );
} finally {
  await db.destroy();
  await bench.drop();
  await pgs.stop();
}
