// Retention against a real PostgreSQL: a backlog of expired jobs is worked off in one run of
// batches, not one batch per interval, and what is not expired stays.
import { sql } from 'kysely';
import { startRetention, RETENTION_BATCH } from '../../server/loops/retention.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { quietLog, until } from '../support/server.js';

let tdb: TestDatabase;
beforeAll(async () => {
  tdb = await createTestDatabase();
});
afterAll(async () => {
  await tdb.drop();
});

const count = async (where: ReturnType<typeof sql>) =>
  Number((await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs WHERE ${where}`.execute(tdb.db)).rows[0].n);

test('a backlog of expired jobs, many batches deep, is deleted in one run, with its runs and output', async () => {
  const expired = RETENTION_BATCH * 8 + 17;
  await sql`
    WITH ins AS (
      INSERT INTO jobs (queue, command, state, attempts, runs, finished_at)
      SELECT 'old', '{true}', 'succeeded', 1, 1, now() - interval '2 hours' - g * interval '1 millisecond'
      FROM generate_series(1, ${expired}) AS g RETURNING id
    ), runs AS (
      INSERT INTO job_attempts (job_id, attempt, outcome) SELECT id, 1, 'succeeded' FROM ins
    )
    INSERT INTO job_logs (job_id, attempt, byte_offset, stream, data) SELECT id, 1, 0, 'stdout', 'x' FROM ins`.execute(
    tdb.db,
  );
  await sql`
    INSERT INTO jobs (queue, command, state, attempts, runs, finished_at)
    SELECT 'recent', '{true}', 'failed', 1, 1, now() - interval '10 minutes' FROM generate_series(1, 5)`.execute(
    tdb.db,
  );
  await sql`INSERT INTO jobs (queue, command) SELECT 'waiting', '{true}' FROM generate_series(1, 5)`.execute(tdb.db);
  // One tick at once and the next in an hour: only working on while work is left empties the backlog.
  const loop = startRetention(
    tdb.db,
    quietLog,
    { jobsMs: 3_600_000, workersMs: 0 },
    { intervalMs: 3_600_000, firstTickMs: 0 },
  );
  try {
    await until('the backlog deleted', async () => (await count(sql`queue = 'old'`)) === 0, 60_000);
  } finally {
    await loop.stop();
  }
  expect(await count(sql`queue IN ('recent', 'waiting')`)).toBe(10);
  const { rows } = await sql<{ runs: number; output: number }>`
    SELECT (SELECT count(*) FROM job_attempts) AS runs, (SELECT count(*) FROM job_logs) AS output`.execute(tdb.db);
  expect(rows[0]).toEqual({ runs: 0, output: 0 });
}, 90_000);

const workerCount = async (where: ReturnType<typeof sql>) =>
  Number((await sql<{ n: number }>`SELECT count(*)::int AS n FROM workers WHERE ${where}`.execute(tdb.db)).rows[0].n);

test('rows of workers gone past their window are deleted in batches; one holding a job stays', async () => {
  const addWorkers = (name: string, n: number, state: string, seenAgo: string) =>
    sql`
      INSERT INTO workers (id, name, cpu, memory_mb, disk_mb, slots, state, last_seen_at)
      SELECT gen_random_uuid(), ${name}, 1, 1, 1, 1, ${state}, now() - ${seenAgo}::interval
      FROM generate_series(1, ${n})`.execute(tdb.db);
  await addWorkers('old-gone', 2500, 'gone', '3 hours');
  await addWorkers('old-deregistered', 40, 'deregistered', '3 hours');
  await addWorkers('recent-gone', 3, 'gone', '10 minutes');
  await addWorkers('old-active', 2, 'active', '3 hours');
  await addWorkers('holding', 1, 'gone', '3 hours');
  // A gone worker whose job's lease the reaper has not taken back yet keeps its row.
  await sql`
    INSERT INTO jobs (queue, command, state, worker_id, lease_token, started_at, lease_expires_at, attempts, runs)
    SELECT 'held', '{true}', 'running', id, gen_random_uuid(), now(), now() + interval '1 minute', 1, 1
    FROM workers WHERE name = 'holding'`.execute(tdb.db);
  const loop = startRetention(
    tdb.db,
    quietLog,
    { jobsMs: 0, workersMs: 3_600_000 },
    { intervalMs: 3_600_000, firstTickMs: 0 },
  );
  try {
    await until('the old workers deleted', async () => (await workerCount(sql`name LIKE 'old-%'`)) === 2, 60_000);
  } finally {
    await loop.stop();
  }
  expect(await workerCount(sql`name = 'old-active'`)).toBe(2);
  expect(await workerCount(sql`name = 'recent-gone'`)).toBe(3);
  expect(await workerCount(sql`name = 'holding'`)).toBe(1);
}, 90_000);
