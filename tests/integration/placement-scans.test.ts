// What a claim, a release and a listing read: a few rows, never the whole backlog, with statistics
// or without them.
import { sql, type Transaction } from 'kysely';
import type { Database, Db } from '../../server/db.js';
import { listJobs } from '../../server/store/jobs.js';
import { releaseJobs } from '../../server/store/leases.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { worker } from '../support/placement-workers.js';

describe('pull mode', () => {
  let t: TestServer;
  beforeEach(async () => {
    t = await startTestServer();
  });
  afterEach(async () => {
    await t.close();
  });

  test('100,000 pending jobs for another region are never read by the claim, and do not starve it', async () => {
    await sql`
      INSERT INTO jobs (command, regions, priority)
      SELECT ARRAY['true'], ARRAY['ord'], 10 FROM generate_series(1, 100000)`.execute(t.tdb.db);
    await sql`ANALYZE jobs`.execute(t.tdb.db);
    const mad = await t.client.register(worker('mad', 'mad'));
    const mine = await t.client.enqueueBatch(
      Array.from({ length: 3 }, () => ({ command: ['true'], constraints: { region: 'mad' } })),
    );
    expect(await rowsReadByCandidates(mad.id, 4)).toBeLessThan(100);
    const claimed = (await t.client.claim(mad.id, 4)).jobs.map((j) => j.id).sort();
    expect(claimed).toEqual(mine.jobs.map((j) => j.id).sort());
  });

  test('a claim of 4 among 100,000 region-free pending jobs reads a few rows, not all of them', async () => {
    await sql`INSERT INTO jobs (command, priority) SELECT ARRAY['true'], g % 7 FROM generate_series(1, 100000) g`.execute(
      t.tdb.db,
    );
    await sql`ANALYZE jobs`.execute(t.tdb.db);
    const w = await t.client.register(worker('any', 'mad'));
    expect(await rowsReadByCandidates(w.id, 4)).toBeLessThan(100);
    const claimed = (await t.client.claim(w.id, 4)).jobs;
    expect((await Promise.all(claimed.map((j) => t.client.getJob(j.id)))).map((j) => j.priority)).toEqual([6, 6, 6, 6]);
  });

  // The claim keeps one generic plan per connection (migrations/004), made without knowing how
  // many jobs it will take: it must still read the pending index in claim order, not every
  // claimable job, also when the statistics say that order is nothing like the table's.
  test('with statistics of a shuffled backlog of 100,000, a claim of 4 reads a few rows, call after call', async () => {
    await sql`INSERT INTO jobs (command, queue, priority) SELECT ARRAY['true'], CASE WHEN random() < 0.5 THEN 'default' ELSE 'other' END, (random() * 1000)::int FROM generate_series(1, 100000)`.execute(
      t.tdb.db,
    );
    await sql`ANALYZE jobs`.execute(t.tdb.db);
    const w = await t.client.register(worker('any', 'mad'));
    for (let i = 0; i < 8; i++) {
      let claimed = 0;
      expect(
        await rowsRead(
          async (trx) =>
            (claimed = (await sql`SELECT * FROM skipjack_claim(${w.id}, 4, 60000)`.execute(trx)).rows.length),
        ),
      ).toBeLessThan(100);
      expect(claimed).toBe(4);
      await sql`UPDATE jobs SET state = 'succeeded', worker_id = NULL, lease_token = NULL, lease_expires_at = NULL, finished_at = now() WHERE state = 'running'`.execute(
        t.tdb.db,
      );
    }
  });

  // Rows of jobs read (by sequential or index scan) by what `fn` runs, from the backend's own statistics.
  // A difference: the counters may still hold the connection's earlier, unflushed transactions.
  async function rowsRead(fn: (trx: Transaction<Database>) => Promise<unknown>): Promise<number> {
    return t.tdb.db.transaction().execute(async (trx) => {
      const read = async () =>
        (
          await sql<{ n: number }>`
        SELECT (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int AS n FROM pg_stat_xact_user_tables WHERE relname = 'jobs'`.execute(
            trx,
          )
        ).rows[0].n;
      const before = await read();
      await fn(trx);
      return (await read()) - before;
    });
  }

  const rowsReadByCandidates = (workerId: string, limit: number) =>
    rowsRead((trx) =>
      sql`
    SELECT c.id FROM workers w, skipjack_worker_load(w.id) AS l,
      skipjack_candidates(w, ARRAY['default'], ${limit}, w.cpu - l.cpu, w.memory_mb - l.memory_mb, w.disk_mb - l.disk_mb, true) AS c
    WHERE w.id = ${workerId}`.execute(trx),
    );

  test('listing pending, failed or running jobs reads those, not the 100,000 others', async () => {
    const w = await t.client.register(worker('any', 'mad'));
    await sql`
      INSERT INTO jobs (command, state, worker_id, lease_token, started_at)
      SELECT ARRAY['true'], 'running', ${w.id}::uuid, gen_random_uuid(), now() FROM generate_series(1, 3)`.execute(
      t.tdb.db,
    );
    await sql`INSERT INTO jobs (command, state, finished_at) SELECT ARRAY['true'], 'failed', now() FROM generate_series(1, 3)`.execute(
      t.tdb.db,
    );
    await sql`INSERT INTO jobs (command, run_at) SELECT ARRAY['true'], now() + interval '1 day' FROM generate_series(1, 3)`.execute(
      t.tdb.db,
    );
    await sql`INSERT INTO jobs (command, state, finished_at) SELECT ARRAY['true'], 'succeeded', now() FROM generate_series(1, 100000)`.execute(
      t.tdb.db,
    );
    await sql`ANALYZE jobs`.execute(t.tdb.db);
    for (const state of ['failed', 'running', 'pending']) {
      let listed = 0;
      expect(
        await rowsRead(
          async (trx) => (listed = (await listJobs(trx as unknown as Db, { state, limit: 50 })).jobs.length),
        ),
      ).toBeLessThan(100);
      expect(listed).toBe(3);
    }
  });

  // A freshly filled table has no statistics yet, and a planner without them once read every job
  // for a claim, and every running job for a release, to find a batch of 250.
  test('without table statistics, a claim and a release of 250 read about their batch, not the table', async () => {
    for (let i = 0; i < 10; i++)
      await t.client.enqueueBatch(Array.from({ length: 2000 }, () => ({ command: ['true'] })));
    const w = await t.client.register(
      worker('any', 'mad', { capacity: { cpu: 4000, memoryMb: 8192, diskMb: 10_000, slots: 250 } }),
    );
    const other = await t.client.register(worker('other', 'mad'));
    let claimed: { id: number; lease_token: string }[] = [];
    expect(
      await rowsRead(
        async (trx) =>
          (claimed = (
            await sql<{ id: number; lease_token: string }>`SELECT * FROM skipjack_claim(${w.id}, 250, 60000)`.execute(
              trx,
            )
          ).rows),
      ),
    ).toBeLessThan(1000);
    await t.client.claim(w.id, 250);
    await sql`
      UPDATE jobs SET state = 'running', worker_id = ${other.id}, lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 hour',
        started_at = now(), runs = 1, attempts = 1
      WHERE state = 'pending' AND id <= 10000`.execute(t.tdb.db);
    const held = (
      await sql<{
        id: number;
        lease_token: string;
      }>`SELECT id, lease_token FROM jobs WHERE worker_id = ${w.id}`.execute(t.tdb.db)
    ).rows;
    expect(claimed).toHaveLength(250);
    expect(held).toHaveLength(250);
    const releases = held.map((j) => ({
      jobId: j.id,
      leaseToken: j.lease_token,
      outcome: 'succeeded' as const,
      exitCode: 0,
    }));
    let released = 0;
    expect(
      await rowsRead(async (trx) => (released = (await releaseJobs(trx as unknown as Db, releases)).size)),
    ).toBeLessThan(1000);
    expect(released).toBe(250);
  });

  // The path a claim takes when a plugin filter or a central queue is configured: load, candidates
  // and lease start as separate functions. Their plans hold without statistics too (PG 15 and 18).
  test('without table statistics, the transaction claim path reads about its batch, not the table', async () => {
    for (let i = 0; i < 10; i++)
      await t.client.enqueueBatch(Array.from({ length: 2000 }, () => ({ command: ['true'] })));
    const w = await t.client.register(
      worker('any', 'mad', { capacity: { cpu: 4000, memoryMb: 8192, diskMb: 10_000, slots: 250 } }),
    );
    await sql`
      UPDATE jobs SET state = 'running', worker_id = ${w.id}, lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 hour',
        started_at = now(), runs = 1, attempts = 1
      WHERE id <= 100`.execute(t.tdb.db);
    let load: { slots: number } | undefined;
    expect(
      await rowsRead(
        async (trx) =>
          ([load] = (await sql<{ slots: number }>`SELECT * FROM skipjack_worker_load(${w.id})`.execute(trx)).rows),
      ),
    ).toBeLessThan(1000);
    expect(load?.slots).toBe(100);
    let ids: number[] = [];
    expect(
      await rowsRead(
        async (trx) =>
          (ids = (
            await sql<{ id: number }>`
      SELECT c.id FROM workers w, skipjack_candidates(w, ARRAY['default'], 250, 4000, 8192, 10000, true) AS c
      WHERE w.id = ${w.id}`.execute(trx)
          ).rows.map((r) => r.id)),
      ),
    ).toBeLessThan(1000);
    expect(ids).toHaveLength(250);
    let started = 0;
    expect(
      await rowsRead(
        async (trx) =>
          (started = (
            await sql`
      SELECT * FROM skipjack_start_leases(${w.id}, ${ids}::bigint[], 60000)`.execute(trx)
          ).rows.length),
      ),
    ).toBeLessThan(1000);
    expect(started).toBe(250);
  });
});
