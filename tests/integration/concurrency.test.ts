// Claims under concurrency: SKIP LOCKED must hand every job to exactly one claimer, and a
// worker's capacity must hold however many claims race for it.
import { sql } from 'kysely';
import type { Db } from '../../server/db.js';
import { reaperTick } from '../../server/loops/reaper-tick.js';
import { loadPlacementSettings } from '../../server/placement/settings.js';
import { quietLog, startTestServer, type TestServer } from '../support/server.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

test('8 concurrent claimers over 2,000 jobs: none claimed twice, none missed', async () => {
  const total = 2000;
  for (let i = 0; i < total; i += 500) {
    await t.client.enqueueBatch(
      Array.from({ length: 500 }, (_, k) => ({ command: ['true'], queue: 'race', env: { N: String(i + k) } })),
    );
  }
  const claimers = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      t.client.register({ name: `c${i}`, queues: ['race'], capacity: { slots: 20 } }),
    ),
  );
  const seen = new Map<number, string>();
  const duplicates: number[] = [];
  await Promise.all(
    claimers.map(async (w) => {
      for (;;) {
        const { jobs } = await t.client.claim(w.id, 20);
        if (jobs.length === 0) return;
        for (const j of jobs) {
          if (seen.has(j.id)) duplicates.push(j.id);
          seen.set(j.id, w.id);
        }
        const { results } = await t.client.request<{ results: { ok: boolean }[] }>('POST', '/releases', {
          releases: jobs.map((j) => ({ jobId: j.id, leaseToken: j.leaseToken, outcome: 'succeeded', exitCode: 0 })),
        });
        expect(results.every((r) => r.ok)).toBe(true);
      }
    }),
  );
  expect(duplicates).toEqual([]);
  expect(seen.size).toBe(total);
  const counts = (
    await sql<{
      state: string;
      n: number;
    }>`SELECT state, count(*)::int AS n FROM jobs WHERE queue = 'race' GROUP BY state`.execute(t.tdb.db)
  ).rows;
  expect(counts).toEqual([{ state: 'succeeded', n: total }]);
  // Each job ran exactly once: one run each, all succeeded.
  const attempts = (
    await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM job_runs a JOIN jobs j ON j.id = a.job_id WHERE j.queue = 'race' AND a.outcome = 'succeeded'`.execute(
      t.tdb.db,
    )
  ).rows[0].n;
  expect(attempts).toBe(total);
  // More than one claimer did real work, or this test proved nothing about concurrency.
  expect(new Set(seen.values()).size).toBeGreaterThan(1);
});

test('many claims racing for one worker never exceed its capacity', async () => {
  const w = await t.client.register({
    name: 'small',
    queues: ['cap'],
    capacity: { slots: 5, cpu: 2000, memoryMb: 1000 },
  });
  await t.client.enqueueBatch(
    Array.from({ length: 40 }, () => ({
      command: ['true'],
      queue: 'cap',
      constraints: { resources: { cpu: 300, memoryMb: 100 } },
    })),
  );
  const answers = await Promise.all(Array.from({ length: 16 }, () => t.client.claim(w.id, 5)));
  const claimed = answers.flatMap((a) => a.jobs);
  // 2000 millicores / 300 per job = 6 by cpu, but only 5 slots: 5 jobs, never more.
  expect(claimed).toHaveLength(5);
  const held = (
    await sql<{
      n: number;
      cpu: number;
    }>`SELECT count(*)::int AS n, sum(need_cpu)::int AS cpu FROM jobs WHERE worker_id = ${w.id} AND state = 'running'`.execute(
      t.tdb.db,
    )
  ).rows[0];
  expect(held).toEqual({ n: 5, cpu: 1500 });
});

// A heartbeat locks its workers' rows, then their jobs' rows. A claim carrying releases must take
// the same order, or the two wait on each other until PostgreSQL aborts one (a deadlock).
test('a claim carrying releases and a heartbeat of the same worker do not deadlock', async () => {
  const w = await t.client.register({ name: 'order', queues: ['order'], capacity: { slots: 2 } });
  const job = await t.client.enqueue({ command: ['true'], queue: 'order' });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  await t.tdb.db.connection().execute(async (heartbeat) => {
    await sql`BEGIN`.execute(heartbeat);
    await sql`UPDATE workers SET last_seen_at = now() WHERE id = ${w.id}`.execute(heartbeat);
    const carrying = t.client.claim(w.id, 1, 0, undefined, [
      { jobId: job.id, leaseToken: claimed.leaseToken, outcome: 'succeeded', exitCode: 0 },
    ]);
    // Until the claim blocks on a lock held by our open transaction.
    await untilSomeoneWaitsOnALock();
    await sql`UPDATE jobs SET lease_expires_at = now() + interval '30 seconds' WHERE id = ${job.id} AND lease_token = ${claimed.leaseToken}`.execute(
      heartbeat,
    );
    await sql`COMMIT`.execute(heartbeat);
    const answer = await carrying;
    expect(answer.releases?.map((r) => r.ok)).toEqual([true]);
  });
  expect((await t.client.getJob(job.id)).state).toBe('succeeded');
});

test('a release that waited on a cancel sees it: the failed run ends cancelled, not retried', async () => {
  const w = await t.client.register({ name: 'cancel-race', queues: ['cancel-race'] });
  const job = await t.client.enqueue({ command: ['false'], queue: 'cancel-race', maxAttempts: 3 });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  await t.tdb.db.connection().execute(async (cancel) => {
    await sql`BEGIN`.execute(cancel);
    await sql`UPDATE jobs SET cancel_requested = true WHERE id = ${job.id}`.execute(cancel);
    const releasing = t.client.release(job.id, { leaseToken: claimed.leaseToken, outcome: 'failed', exitCode: 1 });
    await untilSomeoneWaitsOnALock();
    await sql`COMMIT`.execute(cancel);
    expect(await releasing).toMatchObject({ state: 'cancelled', exitCode: 1 });
  });
});

test("a reaper pass and a heartbeat naming a silent worker's expired lease do not deadlock", async () => {
  // A server of its own whose reaper never runs by itself: this test runs the pass.
  const quiet = await startTestServer({ reaperIntervalMs: 3_600_000 });
  try {
    const db = quiet.tdb.db;
    const w = await quiet.client.register({ name: 'silent', queues: ['silent'] });
    const job = await quiet.client.enqueue({ command: ['true'], queue: 'silent' });
    const [claimed] = (await quiet.client.claim(w.id, 1)).jobs;
    await sql`UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = ${job.id}`.execute(db);
    await sql`UPDATE workers SET last_seen_at = now() - interval '1 hour' WHERE id = ${w.id}`.execute(db);
    const deps = {
      goneAfterMs: 90_000,
      placement: await loadPlacementSettings({}),
      log: quietLog,
      metrics: quiet.server.metrics,
    };
    await db.connection().execute(async (heartbeat) => {
      // A heartbeat locks its worker's row, then the jobs it names.
      await sql`BEGIN`.execute(heartbeat);
      await sql`UPDATE workers SET last_seen_at = now() WHERE id = ${w.id}`.execute(heartbeat);
      const pass = db.transaction().execute((trx) => reaperTick(trx as unknown as Db, deps));
      await untilSomeoneWaitsOnALock(db);
      await sql`UPDATE jobs SET lease_expires_at = now() + interval '30 seconds' WHERE id = ${job.id} AND lease_token = ${claimed.leaseToken}`.execute(
        heartbeat,
      );
      await sql`COMMIT`.execute(heartbeat);
      await pass;
    });
    // The heartbeat came first: the worker is not gone, and its lease lives on.
    expect((await quiet.client.getJob(job.id)).state).toBe('running');
    expect((await quiet.client.workers()).workers.find((x) => x.id === w.id)?.state).toBe('active');
  } finally {
    await quiet.close();
  }
});

// A claim that passes over a job another claim has locked must not sleep as if there were none:
// that claim may leave the job (a plugin filter refused it), and rows it leaves free up at its
// commit with no NOTIFY. Here an open transaction plays that claim.
test('a long-poll whose claim skipped a locked job looks again, and takes it once it is free (transaction claim path)', async () => {
  // A central queue sends every claim down the transaction path, as a plugin filter would.
  const tx = await startTestServer({ placement: { queues: { elsewhere: { mode: 'central' } } } });
  try {
    const w = await tx.client.register({ name: 'skipper', queues: ['skip'] });
    const job = await tx.client.enqueue({ command: ['true'], queue: 'skip' });
    await tx.tdb.db.connection().execute(async (other) => {
      await sql`BEGIN`.execute(other);
      await sql`SELECT id FROM jobs WHERE id = ${job.id} FOR UPDATE`.execute(other);
      // Skipped while locked: the claim comes back empty.
      expect((await tx.client.claim(w.id, 1)).jobs).toEqual([]);
      const longPoll = tx.client.claim(w.id, 1, 10_000);
      await new Promise((r) => setTimeout(r, 300));
      await sql`COMMIT`.execute(other);
      // Before the long-poll's end: it looked again, rather than sleep until a wake-up or its deadline.
      expect((await longPoll).jobs.map((j) => j.id)).toEqual([job.id]);
    });
  } finally {
    await tx.close();
  }
});

async function untilSomeoneWaitsOnALock(db: Db = t.tdb.db) {
  for (let i = 0; i < 200; i++) {
    const waiting = (
      await sql<{
        n: number;
      }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(
        db,
      )
    ).rows[0].n;
    if (waiting > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('nothing waited on a lock within 2 s');
}
