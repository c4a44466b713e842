// Placement against a real Postgres: hard constraints in pull and central mode, capacity under
// concurrency, the backlog pushdown, leadership, the explained "no", and deadlines.
import { sql, type Transaction } from 'kysely';
import pg from 'pg';
import type { RegisterWorker } from '../../protocol/schemas.js';
import type { Database, Db } from '../../server/db.js';
import { SCHEDULER_LOCK, startServer } from '../../server/main.js';
import { listJobs } from '../../server/store/jobs.js';
import { releaseJobs } from '../../server/store/leases.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { quietLog, startTestServer, until, type TestServer } from '../support/server.js';

const worker = (name: string, region: string, over: Partial<RegisterWorker> = {}): RegisterWorker => ({
  name,
  region,
  queues: ['default'],
  capacity: { cpu: 4000, memoryMb: 8192, diskMb: 10_000, slots: 4 },
  ...over,
});

async function post(t: TestServer, path: string, body: unknown) {
  const res = await fetch(t.server.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

describe('pull mode', () => {
  let t: TestServer;
  beforeEach(async () => {
    t = await startTestServer();
  });
  afterEach(async () => {
    await t.close();
  });

  test('a job for region mad never runs on an ord worker', async () => {
    const ord = await t.client.register(worker('ord-1', 'ord'));
    const mad = await t.client.register(worker('mad-1', 'mad'));
    const jobs = (
      await t.client.enqueueBatch(
        Array.from({ length: 6 }, () => ({ command: ['true'], constraints: { region: 'mad' } })),
      )
    ).jobs;
    expect((await t.client.claim(ord.id, 4)).jobs).toEqual([]);
    expect((await t.client.request<{ jobs: unknown[] }>('GET', `/jobs?available&worker=${ord.id}`)).jobs).toEqual([]);
    const claimed = (await t.client.claim(mad.id, 4)).jobs;
    expect(claimed).toHaveLength(4);
    const views = await Promise.all(claimed.map((j) => t.client.getJob(j.id)));
    expect(views.every((j) => j.state === 'running' && j.workerId === mad.id)).toBe(true);
    // Still nothing for ord, even with mad full and two mad jobs waiting.
    expect((await t.client.claim(ord.id, 4)).jobs).toEqual([]);
    const rows = (
      await sql<{ n: number }>`SELECT count(*)::int AS n FROM job_runs WHERE worker_id = ${ord.id}`.execute(t.tdb.db)
    ).rows[0];
    expect(rows.n).toBe(0);
    expect(jobs).toHaveLength(6);
  });

  test('a job for a set of regions runs in one of them; labels are matched as a selector', async () => {
    const ord = await t.client.register(worker('ord', 'ord', { labels: { gpu: 'a100' } }));
    const lis = await t.client.register(worker('lis', 'lis', { labels: { gpu: 't4' } }));
    const a = await t.client.enqueue({ command: ['true'], constraints: { region: ['mad', 'lis'] } });
    const b = await t.client.enqueue({ command: ['true'], constraints: { labels: { gpu: ['a100', 'h100'] } } });
    expect((await t.client.claim(ord.id, 4)).jobs.map((j) => j.id)).toEqual([b.id]);
    expect((await t.client.claim(lis.id, 4)).jobs.map((j) => j.id)).toEqual([a.id]);
  });

  test('capacity holds with 8 workers claiming concurrently', async () => {
    const ws = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        t.client.register(worker(`w${i}`, 'mad', { capacity: { cpu: 1000, memoryMb: 1000, diskMb: 1000, slots: 10 } })),
      ),
    );
    await t.client.enqueueBatch(
      Array.from({ length: 200 }, (_, i) => ({
        command: ['true'],
        constraints: { resources: { cpu: 100 + (i % 4) * 100, memoryMb: 150 } },
      })),
    );
    // Every worker fires several claims at once, twice over.
    for (let round = 0; round < 2; round++) {
      await Promise.all(ws.flatMap((w) => Array.from({ length: 4 }, () => t.client.claim(w.id, 10))));
    }
    const held = (
      await sql<{ worker_id: string; cpu: number; mem: number; n: number }>`
      SELECT worker_id, sum(need_cpu)::int AS cpu, sum(need_memory_mb)::int AS mem, count(*)::int AS n
      FROM jobs WHERE state = 'running' GROUP BY worker_id`.execute(t.tdb.db)
    ).rows;
    expect(held).toHaveLength(8);
    for (const h of held) {
      expect(h.cpu).toBeLessThanOrEqual(1000);
      expect(h.mem).toBeLessThanOrEqual(1000);
      expect(h.n).toBeLessThanOrEqual(10);
    }
    // Memory binds: 1000 / 150 = 6 jobs per worker at most, and the workers filled up.
    expect(held.every((h) => h.n === 6 || h.cpu + 100 > 1000)).toBe(true);
  });

  test('a claim takes jobs first-fit in claim order: one too big for what is left is passed over, a smaller one after it is not', async () => {
    const w = await t.client.register(
      worker('fit', 'mad', { capacity: { cpu: 1000, memoryMb: 8192, diskMb: 10_000, slots: 4 } }),
    );
    const cpu = (n: number, priority: number) => ({
      command: ['true'],
      priority,
      constraints: { resources: { cpu: n } },
    });
    const [a, , c] = (await t.client.enqueueBatch([cpu(600, 3), cpu(600, 2), cpu(300, 1)])).jobs;
    expect((await t.client.claim(w.id, 3)).jobs.map((j) => j.id)).toEqual([a.id, c.id]);
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

  test('enqueue answers 422 with grouped reasons when no known worker could ever run the job', async () => {
    for (let i = 0; i < 3; i++) await t.client.register(worker(`ord-${i}`, 'ord'));
    for (let i = 0; i < 2; i++)
      await t.client.register(worker(`mad-${i}`, 'mad', { capacity: { memoryMb: 512 + i * 512, slots: 2 } }));
    const before = (await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs`.execute(t.tdb.db)).rows[0].n;
    const res = await post(t, '/jobs', {
      command: ['true'],
      constraints: { region: 'mad', resources: { memoryMb: 4096 } },
    });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe('unplaceable');
    expect(res.body.message).toBe(
      'body: no known worker could ever run this job: 0/5 workers fit: 3 region ord≠mad, 2 insufficient memory (need 4096, free ≤ 1024)',
    );
    const batch = await post(t, '/jobs', {
      jobs: [{ command: ['true'] }, { command: ['true'], constraints: { region: 'lis' } }],
    });
    expect(batch.status).toBe(422);
    expect(batch.body.unplaceable).toEqual([
      { path: 'body.jobs.1', reasons: '0/5 workers fit: 3 region ord≠lis, 2 region mad≠lis' },
    ]);
    expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs`.execute(t.tdb.db)).rows[0].n).toBe(before);
    const accepted = await post(t, '/jobs', {
      command: ['true'],
      constraints: { region: 'lis' },
      allowUnplaceable: true,
    });
    expect(accepted.status).toBe(201);
    const waiting = await t.client.getJob(accepted.body.id);
    expect(waiting.waitingReason).toBe('0/5 workers fit: 3 region ord≠lis, 2 region mad≠lis');
  });

  test('with no worker known at all, a job is accepted and says why it waits', async () => {
    const res = await post(t, '/jobs', { command: ['true'], constraints: { region: 'mad' } });
    expect([res.status, res.body.waitingReason]).toEqual([
      201,
      'no worker is known yet: the job runs when one that fits it registers',
    ]);
    expect((await t.client.getJob(res.body.id)).waitingReason).toMatch(/^no live worker/);
  });

  test('a job for a queue no known worker serves is accepted, and its enqueue answer says why it will wait', async () => {
    await t.client.register(worker('ord', 'ord'));
    const res = await post(t, '/jobs', { jobs: [{ command: ['true'], queue: 'nobody' }, { command: ['true'] }] });
    expect(res.status).toBe(201);
    expect(res.body.jobs.map((j: { waitingReason: string | null }) => j.waitingReason)).toEqual([
      'no known worker serves queue nobody: the job runs when one that serves it and fits it registers',
      null,
    ]);
  });

  test('a job not placed by its deadline fails as unplaceable, with the reasons', async () => {
    const mad = await t.client.register(worker('mad', 'mad', { capacity: { slots: 1 } }));
    await t.client.enqueue({ command: ['sleep', '10'], constraints: { region: 'mad' } });
    expect((await t.client.claim(mad.id, 1)).jobs).toHaveLength(1);
    const late = await t.client.enqueue({
      command: ['true'],
      constraints: { region: 'mad' },
      placementDeadlineSeconds: 0.5,
    });
    const failed = await until('deadline failure', async () => {
      const j = await t.client.getJob(late.id);
      return j.state === 'failed' ? j : undefined;
    });
    expect(failed.endReason).toBe('unplaceable');
    expect(failed.error).toBe('unplaceable: not placed within 0.5s; 0/1 workers fit: 1 no free slot');
  });

  test('a placement deadline ends once the job is placed: its retries are not failed for it', async () => {
    const mad = await t.client.register(worker('mad', 'mad'));
    const job = await t.client.enqueue({
      command: ['false'],
      constraints: { region: 'mad' },
      placementDeadlineSeconds: 0.3,
      retryBackoffSeconds: 0,
    });
    const [first] = (await t.client.claim(mad.id, 1)).jobs;
    await new Promise((r) => setTimeout(r, 600));
    expect(
      (await t.client.release(job.id, { leaseToken: first.leaseToken, outcome: 'failed', exitCode: 1 })).state,
    ).toBe('pending');
    await new Promise((r) => setTimeout(r, 600)); // several reaper ticks past the original deadline
    expect(await t.client.getJob(job.id)).toMatchObject({ state: 'pending', endReason: 'exited' });
    expect((await t.client.claim(mad.id, 1)).jobs.map((j) => j.id)).toEqual([job.id]);
  });

  test("the explain endpoint shows every worker's verdict and scores", async () => {
    const busy = await t.client.register(
      worker('busy', 'mad', { capacity: { cpu: 4000, memoryMb: 8000, diskMb: 1000, slots: 4 } }),
    );
    const idle = await t.client.register(
      worker('idle', 'mad', { capacity: { cpu: 4000, memoryMb: 8000, diskMb: 1000, slots: 4 } }),
    );
    await t.client.register(worker('far', 'ord'));
    await t.client.enqueue({ command: ['true'], constraints: { resources: { cpu: 2000, memoryMb: 4000 } } });
    expect((await t.client.claim(busy.id, 1)).jobs).toHaveLength(1);
    const job = await t.client.enqueue({
      command: ['true'],
      constraints: { region: 'mad', resources: { cpu: 1000, memoryMb: 2000 } },
    });
    const explained = await t.client.placement(job.id);
    const byName = Object.fromEntries(explained.verdicts.map((v) => [v.workerName, v]));
    // least-allocated, busy: cpu (4000-3000)*100/4000 = 25, memory (8000-6000)*100/8000 = 25 → 25.
    // idle: cpu (4000-1000)*100/4000 = 75, memory (8000-2000)*100/8000 = 75 → 75. affinity: 0 (no preferences).
    // total = (1*score + 2*0) / 3.
    expect(byName.busy).toMatchObject({ fits: true, scores: { 'least-allocated': 25, affinity: 0 } });
    expect(byName.busy.total).toBeCloseTo(25 / 3);
    expect(byName.idle).toMatchObject({ fits: true, scores: { 'least-allocated': 75, affinity: 0 } });
    expect(byName.idle.total).toBeCloseTo(25);
    expect(byName.far).toMatchObject({ fits: false, filter: 'region', reason: 'region ord≠mad' });
    expect(explained.bestWorkerId).toBe(idle.id);
    expect(explained.summary).toBe('2/3 workers fit: 1 region ord≠mad');
  });
});

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
