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
  const loop = startRetention(tdb.db, quietLog, 3_600_000, { intervalMs: 3_600_000, firstTickMs: 0 });
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
