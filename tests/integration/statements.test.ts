// The server's statements against a real Postgres: prepared statements, HOT heartbeats, the
// NOTIFY of rows a claim skipped, retention, the statement timeout.
import { sql } from 'kysely';
import pg from 'pg';
import { ApiRequestError, SkipjackClient } from '../../protocol/client.js';
import { createDb } from '../../server/db.js';
import { startServer } from '../../server/main.js';
import { deleteExpiredJobs } from '../../server/store/reaper.js';
import { workerHeartbeats } from '../../server/store/workers.js';
import { PreparedStatements } from '../../server/store/prepared.js';
import { FIXTURE_APPLICATION } from '../support/state-machine.js';
import { quietLog, startTestServer, until, type TestServer } from '../support/server.js';
import { sleepingClaim } from '../support/api.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ leaseTtlMs: 1000 });
});
afterAll(async () => {
  await t.close();
});

test('a prepared statement outlives a change to the table it returns: it is prepared again', async () => {
  const pool = new pg.Pool({ connectionString: t.tdb.url, max: 1 });
  const statements = new PreparedStatements(pool);
  const query = sql<{ id: number }>`SELECT * FROM jobs WHERE id = ${-1}`.compile(t.tdb.db);
  try {
    expect(await statements.rows(query)).toEqual([]);
    // What a migration run by a newer server does under this one.
    await sql`ALTER TABLE jobs ADD COLUMN prepared_probe int`.execute(t.tdb.db);
    expect(await statements.rows(query)).toEqual([]);
    // And the server's own prepared hand-off goes on working.
    const w = await t.client.register({ name: 'handoff-altered', queues: ['handoff-altered'] });
    const { answer } = await sleepingClaim(t.client, t.server.url, w.id, 1, 10_000);
    const job = await t.client.enqueue({ command: ['true'], queue: 'handoff-altered' });
    expect((await answer).jobs.map((j) => j.id)).toEqual([job.id]);
  } finally {
    await sql`ALTER TABLE jobs DROP COLUMN IF EXISTS prepared_probe`.execute(t.tdb.db);
    await pool.end();
  }
});

test('named statements lost between calls (a pooler in transaction mode) are given up for unnamed ones, said once', async () => {
  const pool = new pg.Pool({ connectionString: t.tdb.url, max: 1 });
  const lost: string[] = [];
  const statements = new PreparedStatements(pool, (err) => lost.push(err.message));
  const query = sql<{ id: number }>`SELECT * FROM jobs WHERE id = ${-1}`.compile(t.tdb.db);
  const prepared = async () =>
    Number((await pool.query('SELECT count(*)::int AS n FROM pg_prepared_statements')).rows[0].n);
  try {
    expect(await statements.rows(query)).toEqual([]);
    expect(await prepared()).toBe(1);
    // What a transaction-mode pooler does: the next call reaches a server connection without it.
    await pool.query('DEALLOCATE ALL');
    expect(await statements.rows(query)).toEqual([]);
    expect(await statements.rows(query)).toEqual([]);
    expect(lost).toEqual([expect.stringContaining('does not exist')]);
    expect(await prepared()).toBe(0);
  } finally {
    await pool.end();
  }
});

test('a claim that locked rows it did not take says so (NOTIFY), or claimers that skipped them would sleep', async () => {
  const w = await t.client.register({ name: 'two-queues', queues: ['left-a', 'left-b'], capacity: { slots: 10 } });
  await t.client.enqueueBatch(
    [5, 5, 1, 1].map((priority, i) => ({ command: ['true'], priority, queue: i < 2 ? 'left-a' : 'left-b' })),
  );
  const listener = new pg.Client({ connectionString: t.tdb.url });
  await listener.connect();
  try {
    const payloads: string[] = [];
    listener.on('notification', (n) => payloads.push(n.payload ?? ''));
    await listener.query('LISTEN skipjack_jobs');
    // Each queue's range locks up to 2 rows; the claim takes the 2 of priority 5 and leaves left-b's 2.
    const { jobs } = await t.client.claim(w.id, 2);
    expect(jobs.map((j) => j.queue)).toEqual(['left-a', 'left-a']);
    await until('the wake-up for the rows left', async () => payloads.includes('') || undefined, 3000);
  } finally {
    await listener.end();
  }
});

test('a heartbeat extends leases in place (HOT updates), not by writing index entries', async () => {
  const w = await t.client.register({ name: 'hot', queues: ['hot'], capacity: { slots: 50 } });
  await t.client.enqueueBatch(Array.from({ length: 50 }, () => ({ command: ['true'], queue: 'hot' })));
  // Claimed with a lease of a minute, not this server's 1 s: the reaper must not take them meanwhile.
  const { rows: jobs } = await sql<{
    id: number;
    lease_token: string;
  }>`SELECT id, lease_token FROM skipjack_claim(${w.id}, 50, 60000)`.execute(t.tdb.db);
  expect(jobs).toHaveLength(50);
  const leases = jobs.map((j) => ({ jobId: Number(j.id), leaseToken: j.lease_token }));
  // One heartbeat per transaction, as the server sends them. The counters are this connection's
  // not yet reported to the statistics: read them before and after.
  const counters = async (trx: typeof t.tdb.db) =>
    (
      await sql<{ upd: number; hot: number }>`
    SELECT pg_stat_get_xact_tuples_updated('jobs'::regclass)::int AS upd,
           pg_stat_get_xact_tuples_hot_updated('jobs'::regclass)::int AS hot`.execute(trx)
    ).rows[0];
  const heartbeat = () =>
    t.tdb.db.transaction().execute(async (trx) => {
      const before = await counters(trx);
      const [answer] = await workerHeartbeats(trx, [{ workerId: w.id, leases }], 60_000);
      expect(answer).toMatchObject({ lost: [] });
      const after = await counters(trx);
      return { updated: after.upd - before.upd, hot: after.hot - before.hot };
    });
  // An update is in place only where its page has room. The claim's new row versions took the
  // room fillfactor left, so the first heartbeats wait for PostgreSQL to prune the old versions,
  // which any older snapshot in the database (an autovacuum's ANALYZE, say) puts off. Until then
  // a heartbeat is not in place; once pruned, nearly every one is. With lease_expires_at indexed
  // (before migration 005) none ever is.
  let last = { updated: 0, hot: 0 };
  for (let round = 0; round < 60 && last.hot < 40; round++) {
    if (round > 0) await new Promise((r) => setTimeout(r, 50));
    last = await heartbeat();
    expect(last.updated).toBe(50);
  }
  expect(last.hot).toBeGreaterThanOrEqual(40);
});

test('retention deletes finished jobs past the window, with their runs and output, and nothing else', async () => {
  const old = await t.client.enqueue({ command: ['true'], queue: 'retention' });
  const recent = await t.client.enqueue({ command: ['true'], queue: 'retention' });
  const waiting = await t.client.enqueue({ command: ['true'], queue: 'retention' });
  await sql`UPDATE jobs SET state = 'succeeded', finished_at = now() - interval '2 hours' WHERE id = ${old.id}`.execute(
    t.tdb.db,
  );
  await sql`UPDATE jobs SET state = 'failed', finished_at = now() - interval '10 minutes' WHERE id = ${recent.id}`.execute(
    t.tdb.db,
  );
  await sql`INSERT INTO job_attempts (job_id, attempt, outcome) VALUES (${old.id}, 1, 'succeeded')`.execute(t.tdb.db);
  await sql`INSERT INTO job_logs (job_id, attempt, byte_offset, stream, data) VALUES (${old.id}, 1, 0, 'stdout', 'x')`.execute(
    t.tdb.db,
  );
  expect(await deleteExpiredJobs(t.tdb.db, 3_600_000)).toBe(1);
  const left = (
    await sql<{ id: number }>`SELECT id FROM jobs WHERE queue = 'retention' ORDER BY id`.execute(t.tdb.db)
  ).rows.map((r) => r.id);
  expect(left).toEqual([recent.id, waiting.id]);
  const orphans = (
    await sql<{
      n: number;
    }>`SELECT (SELECT count(*) FROM job_attempts WHERE job_id = ${old.id}) + (SELECT count(*) FROM job_logs WHERE job_id = ${old.id}) AS n`.execute(
      t.tdb.db,
    )
  ).rows[0];
  expect(Number(orphans.n)).toBe(0);
});

test('a statement stuck behind a lock ends at the statement timeout as a 503, and changes nothing', async () => {
  const timed = await startServer({ ...t.config, port: 0, statementTimeoutMs: 300 }, quietLog);
  const client = new SkipjackClient({ baseUrl: timed.url });
  const job = await t.client.enqueue({ command: ['true'], queue: 'stuck' });
  const { pool } = createDb(t.tdb.url, 1, FIXTURE_APPLICATION);
  const holder = await pool.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE', [job.id]);
    const cancel = client.cancel(job.id).then(
      () => 'answered',
      (err: ApiRequestError) => [err.status, (err.body as { error: string }).error],
    );
    expect(await Promise.race([cancel, new Promise((r) => setTimeout(() => r('still waiting'), 10_000))])).toEqual([
      503,
      'database_timeout',
    ]);
  } finally {
    await holder.query('ROLLBACK');
    holder.release();
    await pool.end();
    await timed.close();
  }
  expect((await t.client.getJob(job.id)).state).toBe('pending');
});
