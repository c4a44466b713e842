// Central mode against a real Postgres: assignments keep to the hard constraints, one leader
// schedules, and a dead assignee gives its work back.
import { sql } from 'kysely';
import pg from 'pg';
import { SCHEDULER_LOCK, startServer } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { quietLog, startTestServer, until } from '../support/server.js';
import { worker } from '../support/placement-workers.js';

describe('central mode', () => {
  let tdb: TestDatabase;
  beforeEach(async () => {
    tdb = await createTestDatabase();
  });
  afterEach(async () => {
    await tdb.drop();
  });
  const central = (over = {}) => startTestServer({ placementMode: 'central', workerGoneAfterMs: 1000, ...over }, tdb);

  test('the scheduler assigns mad jobs only to mad workers, and their claims start them', async () => {
    const t = await central();
    try {
      const ord = await t.client.register(worker('ord', 'ord'));
      const mad = await t.client.register(worker('mad', 'mad'));
      const jobs = (
        await t.client.enqueueBatch(
          Array.from({ length: 6 }, () => ({ command: ['true'], constraints: { region: 'mad' } })),
        )
      ).jobs;
      await until(
        'assignments',
        async () =>
          (await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs WHERE state = 'assigned'`.execute(tdb.db))
            .rows[0].n === 4,
      );
      expect((await t.client.claim(ord.id, 4)).jobs).toEqual([]);
      const started = (await t.client.claim(mad.id, 4)).jobs;
      expect(started).toHaveLength(4);
      const views = await Promise.all(started.map((j) => t.client.getJob(j.id)));
      expect(views.every((j) => j.state === 'running' && j.workerId === mad.id)).toBe(true);
      const onOrd = (
        await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs WHERE worker_id = ${ord.id}`.execute(tdb.db)
      ).rows[0].n;
      expect(onOrd).toBe(0);
      expect(jobs).toHaveLength(6);
    } finally {
      await t.server.close();
    }
  });

  test('leadership: with two servers, scheduling happens only under the advisory lock', async () => {
    const a = await central({ workerGoneAfterMs: 60_000 });
    const b = await startServer({ ...a.config, port: 0 }, quietLog);
    const holder = new pg.Client({ connectionString: tdb.url });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [SCHEDULER_LOCK]);
      await a.client.register(worker('mad', 'mad'));
      const job = await a.client.enqueue({ command: ['true'] });
      await new Promise((r) => setTimeout(r, 1000));
      // Neither replica scheduled while someone else held the leader lock.
      expect((await a.client.getJob(job.id)).state).toBe('pending');
      await holder.query('SELECT pg_advisory_unlock($1)', [SCHEDULER_LOCK]);
      await until('assigned', async () => (await a.client.getJob(job.id)).state === 'assigned');
      const attempts = (
        await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs WHERE state = 'assigned'`.execute(tdb.db)
      ).rows[0].n;
      expect(attempts).toBe(1);
    } finally {
      await holder.end();
      await b.close();
      await a.server.close();
    }
  });

  test('an assignment held by a worker that died goes back to pending and to a live worker', async () => {
    const t = await central({ leaseTtlMs: 600 });
    try {
      const dead = await t.client.register(worker('dead', 'mad'));
      const job = await t.client.enqueue({ command: ['true'], constraints: { region: 'mad' } });
      await until('assigned to the first worker', async () => (await t.client.getJob(job.id)).workerId === dead.id);
      // The first worker never claims or heartbeats again; a second one keeps itself alive.
      const live = await t.client.register(worker('live', 'mad'));
      const keepAlive = setInterval(() => void t.client.workerHeartbeat(live.id, []).catch(() => {}), 200);
      try {
        await until('reassigned', async () => (await t.client.getJob(job.id)).workerId === live.id, 15_000);
      } finally {
        clearInterval(keepAlive);
      }
      const started = (await t.client.claim(live.id, 1)).jobs;
      expect(started.map((j) => j.id)).toEqual([job.id]);
    } finally {
      await t.server.close();
    }
  });
});
