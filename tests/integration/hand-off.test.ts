// The hand-off: an enqueue that claims, in its own statement, for a long-poll asleep on the same server.
import { sql } from 'kysely';
import pg from 'pg';
import { compileHandOff, handOffStatement } from '../../server/store/hand-off.js';
import { toInsertRow } from '../../server/store/jobs.js';
import { enqueueJobSchema } from '../../protocol/schemas.js';
import { startTestServer, until, type TestServer } from '../support/server.js';
import { metric, serverHelpers, sleepingClaim, sleepingLongPolls } from '../support/api.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ leaseTtlMs: 1000 });
});
afterAll(async () => {
  await t.close();
});

const { handedOff, insertAndClaimTimes } = serverHelpers(() => t);

describe('hand-off: an enqueue claims for a long-poll asleep on the same server, in its own commit', () => {
  const claimAsleep = (workerId: string, max: number, waitMs = 10_000) =>
    sleepingClaim(t.client, t.server.url, workerId, max, waitMs);

  test('the job goes to the sleeping worker, claimed in the transaction that inserted it', async () => {
    const w = await t.client.register({ name: 'handoff', queues: ['handoff'] });
    const before = await handedOff();
    const asleep = await sleepingLongPolls(t.server.url);
    const { answer: claim } = await claimAsleep(w.id, 4);
    const job = await t.client.enqueue({ command: ['true'], queue: 'handoff' });
    const { jobs } = await claim;
    // Read at once: the lease here is 1 s, and the reaper would put the job back after it.
    const read = await t.client.getJob(job.id);
    expect(jobs.map((j) => j.id)).toEqual([job.id]);
    expect(jobs[0]).toMatchObject({
      command: ['true'],
      env: {},
      secretEnv: [],
      attempt: 1,
      leaseToken: expect.any(String),
    });
    expect(Object.keys(jobs[0])).not.toContain('ordinality');
    // One transaction: now() is the same for the insert and for the claim.
    const { created_at, started_at } = await insertAndClaimTimes(job.id);
    expect(started_at.getTime()).toBe(created_at.getTime());
    expect(await handedOff()).toBe(before + 1);
    expect(await sleepingLongPolls(t.server.url)).toBe(asleep);
    // The enqueue answers with the job as its commit left it: running, on that worker.
    expect(job).toMatchObject({ state: 'running', workerId: w.id, attempts: 1 });
    expect(job).toEqual(read);
  });

  test('a job handed off sends no NOTIFY; a job the hand-off leaves, or one enqueued with nobody asleep, still does', async () => {
    const queue = 'handoff-quiet';
    const w = await t.client.register({ name: queue, queues: [queue] });
    const listener = new pg.Client({ connectionString: t.tdb.url });
    await listener.connect();
    try {
      const payloads: string[] = [];
      listener.on('notification', (n) => {
        if (n.payload?.startsWith(`${queue} `)) payloads.push(n.payload);
      });
      await listener.query('LISTEN skipjack_jobs');
      const { answer: claim } = await claimAsleep(w.id, 2);
      const { jobs: batch } = await t.client.enqueueBatch(
        [0, 9, 5].map((priority) => ({ command: ['true'], queue, priority })),
      );
      expect((await claim).jobs.map((j) => j.id)).toEqual([batch[1].id, batch[2].id]);
      const alone = await t.client.enqueue({ command: ['true'], queue });
      // NOTIFYs come in commit order: once the last enqueue's is here, the batch's would be too.
      await until(
        "the plain enqueue's NOTIFY",
        async () => payloads.some((p) => p.endsWith(` ${alone.id}`)) || undefined,
        3000,
      );
      expect(payloads.map((p) => p.split(' ')[2])).toEqual([String(batch[0].id), String(alone.id)]);
    } finally {
      await listener.end();
    }
  });

  /**
   * Two long-polls asleep on `queue`, then one enqueue: the first is handed the job. A NOTIFY of
   * that job (as an enqueue whose job a claim took first sends) wakes nobody: it is checked first.
   */
  async function onlyTheHandOffWakes(queue: string) {
    const skipped = () => metric(t.server.url, 'skipjack_job_wakeups_skipped_total');
    const [w1, w2] = await Promise.all([
      t.client.register({ name: `${queue}-1`, queues: [queue] }),
      t.client.register({ name: `${queue}-2`, queues: [queue] }),
    ]);
    const { answer: first } = await claimAsleep(w1.id, 1);
    const { answer: second } = await claimAsleep(w2.id, 1, 3000);
    const before = await skipped();
    const job = await t.client.enqueue({ command: ['true'], queue });
    const { jobs } = await first;
    expect(jobs.map((j) => j.id)).toEqual([job.id]);
    // Done at once, so that no lapsed lease (1 s here) makes the job pending again.
    await t.client.release(job.id, { leaseToken: jobs[0].leaseToken, outcome: 'succeeded', exitCode: 0 });
    await sql`SELECT pg_notify('skipjack_jobs', ${`${queue} ${Date.now()} ${job.id}`})`.execute(t.tdb.db);
    await until('the NOTIFY to be checked and dropped', async () => (await skipped()) > before);
    // The other long-poll slept on to its deadline, with nothing for it.
    expect((await second).jobs).toEqual([]);
  }

  test('a NOTIFY of a job already taken wakes no other long-poll: nothing is pending by the time it comes', async () => {
    await onlyTheHandOffWakes('herd');
  });

  test("a pending job no sleeping worker can take does not make the next job's NOTIFY wake them all", async () => {
    // It waits for a worker with a GPU, which neither sleeper has; before, every NOTIFY of its queue woke both.
    const stuck = await t.client.enqueue({
      command: ['true'],
      queue: 'stuck',
      constraints: { labels: { gpu: 'a100' } },
      allowUnplaceable: true,
    });
    await onlyTheHandOffWakes('stuck');
    expect((await t.client.getJob(stuck.id)).state).toBe('pending');
  });

  test("one job's hand-off statement, compiled once for its columns and given its values, is the statement compiled anew", () => {
    const jobs = [
      { command: ['true'] },
      {
        command: ['sh', '-c', 'x'],
        env: { A: '1' },
        runAt: new Date(Date.now() + 60_000).toISOString(),
        idempotencyKey: 'k',
        constraints: { region: 'mad', labels: { gpu: 'a100' } },
        timeoutSeconds: 5,
        placementDeadlineSeconds: 9,
      },
      // The same columns as the first: its compiled statement, other values.
      { command: ['false'], queue: 'other', priority: 7, maxAttempts: 1 },
    ].map((job) => enqueueJobSchema.parse(job));
    for (const job of jobs) {
      const rows = [toInsertRow(job)];
      const cached = compileHandOff(t.tdb.db, rows, 'a-worker', { max: 3, leaseTtlMs: 1234 });
      const fresh = handOffStatement(t.tdb.db, rows, 'a-worker', 3, 1234).compile(t.tdb.db);
      expect([cached.sql, cached.parameters]).toEqual([fresh.sql, fresh.parameters]);
    }
  });

  test('the hand-off claims in claim order: an older job of higher priority goes before the new one', async () => {
    const w = await t.client.register({ name: 'handoff-order', queues: ['handoff-order'] });
    const { answer: claim } = await claimAsleep(w.id, 1);
    // Stored without a wake-up, as if through a server whose NOTIFY has not arrived yet.
    const older = await t.tdb.db.transaction().execute(async (trx) => {
      await sql`SET LOCAL session_replication_role = replica`.execute(trx);
      return (
        await sql<{
          id: number;
        }>`INSERT INTO jobs (command, queue, priority) VALUES (ARRAY['true'], 'handoff-order', 5) RETURNING id`.execute(
          trx,
        )
      ).rows[0];
    });
    const newer = await t.client.enqueue({ command: ['true'], queue: 'handoff-order', priority: 0 });
    const { jobs } = await claim;
    expect(jobs.map((j) => j.id)).toEqual([older.id]);
    expect((await t.client.getJob(newer.id)).state).toBe('pending');
  });

  test('a batch hands over no more than the long-poll asked for, in order; the rest stays pending', async () => {
    const w = await t.client.register({ name: 'handoff-batch', queues: ['handoff-batch'] });
    const { answer: claim } = await claimAsleep(w.id, 2);
    const { jobs: batch } = await t.client.enqueueBatch(
      [0, 9, 5].map((priority) => ({ command: ['true'], queue: 'handoff-batch', priority })),
    );
    const { jobs } = await claim;
    expect(jobs.map((j) => j.id)).toEqual([batch[1].id, batch[2].id]);
    expect((await t.client.getJob(batch[0].id)).state).toBe('pending');
    expect(batch.map((j) => j.state)).toEqual(['pending', 'running', 'running']);
  });

  test('an idempotent repeat hands over the existing job if it is still pending', async () => {
    const w = await t.client.register({ name: 'handoff-repeat', queues: ['handoff-repeat'] });
    const first = await t.client.enqueue({
      command: ['true'],
      queue: 'handoff-repeat',
      idempotencyKey: `repeat-${Date.now()}`,
    });
    await sql`UPDATE jobs SET run_at = now() + interval '1 hour' WHERE id = ${first.id}`.execute(t.tdb.db);
    const { answer: claim } = await claimAsleep(w.id, 1);
    await sql`UPDATE jobs SET run_at = now() WHERE id = ${first.id}`.execute(t.tdb.db);
    const repeat = await t.client.enqueue({
      command: ['true'],
      queue: 'handoff-repeat',
      idempotencyKey: first.idempotencyKey!,
    });
    expect(repeat.id).toBe(first.id);
    expect((await claim).jobs.map((j) => j.id)).toEqual([first.id]);
  });

  test("an enqueue does not wait for a worker's row lock: the job goes in alone, and the long-poll takes it once the lock is gone", async () => {
    const w = await t.client.register({ name: 'handoff-locked', queues: ['handoff-locked'] });
    const { answer: claim } = await claimAsleep(w.id, 1);
    const before = await handedOff();
    const locker = new pg.Client({ connectionString: t.tdb.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM workers WHERE id = $1 FOR NO KEY UPDATE', [w.id]);
      const job = await t.client.enqueue({ command: ['true'], queue: 'handoff-locked' });
      expect((await t.client.getJob(job.id)).state).toBe('pending');
      expect(await handedOff()).toBe(before);
      await locker.query('COMMIT');
      expect((await claim).jobs.map((j) => j.id)).toEqual([job.id]);
    } finally {
      await locker.end();
    }
  });

  test.each([
    ['slots', { slots: 1 }, {}],
    ['cpu', { slots: 4, cpu: 2 }, { resources: { cpu: 2 } }],
  ])(
    "a full worker's long-poll is not handed a job past its capacity (%s): the job stays pending",
    async (name, capacity, constraints) => {
      const queue = `handoff-full-${name}`;
      const w = await t.client.register({ name: queue, queues: [queue], capacity });
      const first = await t.client.enqueue({ command: ['true'], queue, constraints });
      expect((await t.client.claim(w.id, 1)).jobs.map((j) => j.id)).toEqual([first.id]);
      // The server does not know the worker's load: the statement's check is what keeps it.
      const { answer: claim } = await claimAsleep(w.id, 1, 300);
      const second = await t.client.enqueue({ command: ['true'], queue, constraints: { resources: { cpu: 1 } } });
      expect(second.state).toBe('pending');
      const { rows } = await sql<{
        n: number;
      }>`SELECT count(*)::int AS n FROM jobs WHERE worker_id = ${w.id} AND state = 'running'`.execute(t.tdb.db);
      expect(rows[0].n).toBe(1);
      await claim;
    },
  );

  test('skipjack_can_start_new: an active worker with room, no lock held on it and no job of its queues due first', async () => {
    const queue = 'can-start';
    const w = await t.client.register({
      name: queue,
      queues: [queue],
      capacity: { slots: 2, cpu: 4, memoryMb: 100, diskMb: 100 },
    });
    const can = async (cpu = 1, memoryMb = 0, diskMb = 0) =>
      (
        await sql<{
          ok: boolean;
        }>`SELECT skipjack_can_start_new(${w.id}, ${cpu}, ${memoryMb}, ${diskMb}) AS ok`.execute(t.tdb.db)
      ).rows[0].ok;
    expect(await can()).toBe(true);
    expect([await can(5), await can(1, 101), await can(1, 0, 101)]).toEqual([false, false, false]);
    // A job for later does not count; a due one does, even one the worker could not run: the claim decides.
    await t.client.enqueue({ command: ['true'], queue, runAt: new Date(Date.now() + 3_600_000).toISOString() });
    expect(await can()).toBe(true);
    const big = await t.client.enqueue({
      command: ['true'],
      queue,
      constraints: { resources: { cpu: 64 } },
      allowUnplaceable: true,
    });
    expect(await can()).toBe(false);
    await t.client.cancel(big.id);
    expect(await can()).toBe(true);
    // Its row locked by a claim or a heartbeat of its own: no waiting for it.
    const locker = new pg.Client({ connectionString: t.tdb.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM workers WHERE id = $1 FOR NO KEY UPDATE', [w.id]);
      expect(await can()).toBe(false);
      await locker.query('ROLLBACK');
    } finally {
      await locker.end();
    }
    await t.client.drain(w.id);
    expect(await can()).toBe(false);
  });

  // The job that goes in started (013) is checked against the worker's region and labels by the
  // server alone, before it picks the sleeping claim: these fail if that check misses a filter.
  test.each([
    ['region', { region: 'ord' }, { region: 'mad' }],
    ['labels', { region: 'mad', labels: { gpu: 't4' } }, { region: 'mad', labels: { gpu: 'a100' } }],
  ])(
    'no hand-off crosses a hard constraint (%s): the sleeping worker is not given the job',
    async (name, worker, constraints) => {
      const queue = `handoff-${name}`;
      const w = await t.client.register({ name: queue, queues: [queue], ...worker });
      const { answer: claim } = await claimAsleep(w.id, 1, 1500);
      const job = await t.client.enqueue({ command: ['true'], queue, constraints, allowUnplaceable: true });
      expect((await claim).jobs).toEqual([]);
      expect((await t.client.getJob(job.id)).state).toBe('pending');
    },
  );

  test('a job due later is not handed off; it wakes the long-poll when due', async () => {
    const w = await t.client.register({ name: 'handoff-later', queues: ['handoff-later'] });
    const { answer: claim } = await claimAsleep(w.id, 1);
    const job = await t.client.enqueue({
      command: ['true'],
      queue: 'handoff-later',
      runAt: new Date(Date.now() + 2000).toISOString(),
    });
    expect((await t.client.getJob(job.id)).state).toBe('pending');
    const { jobs } = await claim;
    expect(jobs.map((j) => j.id)).toEqual([job.id]);
  });
});
