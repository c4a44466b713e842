// docs/state-machine.md against the running system: every transition it lists happens through the
// server's own paths, and nothing else does. The recorder in every test database
// (tests/support/state-machine.ts) sees each state change; here they are gathered from a pull
// server and a central one, and held to the doc's table in both directions.
import { sql } from 'kysely';
import type { RegisterWorker } from '../../protocol/schemas.js';
import { createDb, type Db } from '../../server/db.js';
import { deleteExpiredJobs } from '../../server/store/reaper.js';
import { checkTransitions, documentedTransitions, key, recordedTransitions } from '../support/state-machine.js';
import { startTestServer, until, type TestServer } from '../support/server.js';

const worker = (name: string, queue: string, over: Partial<RegisterWorker> = {}): RegisterWorker => ({
  name,
  queues: [queue],
  capacity: { cpu: 4000, memoryMb: 8192, diskMb: 10_000, slots: 4 },
  ...over,
});

const seen = new Set<string>();
async function gather(t: TestServer) {
  for (const tr of await recordedTransitions(t.tdb.db)) seen.add(key(tr));
}
/** A connection as the server's own (the test's connection is a fixture's, which the recorder skips). */
async function asServer<T>(t: TestServer, work: (db: Db) => Promise<T>): Promise<T> {
  const { db } = createDb(t.tdb.url, 1);
  try {
    return await work(db);
  } finally {
    await db.destroy();
  }
}

const stateOf = async (t: TestServer, id: number) => (await t.client.getJob(id)).state;

/** Takes the job's lease away as if its worker fell silent; the server's reaper (every 200 ms) does the rest. */
async function expireLease(t: TestServer, id: number) {
  await sql`UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = ${id}`.execute(t.tdb.db);
}

test('pull mode: enqueue, claim, the four release outcomes, lost leases, cancel, deadlines, retention', async () => {
  const t = await startTestServer({ leaseTtlMs: 60_000 });
  try {
    const w = await t.client.register(worker('w', 'pull'));
    const claimOne = async () => (await t.client.claim(w.id, 1)).jobs[0];
    const release = async (outcome: 'succeeded' | 'failed' | 'cancelled' | 'requeue') => {
      const job = await t.client.enqueue({ command: ['true'], queue: 'pull', maxAttempts: 1 });
      const run = await claimOne();
      expect(run.id).toBe(job.id);
      return t.client.release(run.id, { leaseToken: run.leaseToken, outcome, exitCode: outcome === 'failed' ? 1 : 0 });
    };
    expect((await release('succeeded')).state).toBe('succeeded');
    expect((await release('failed')).state).toBe('failed');
    expect((await release('cancelled')).state).toBe('cancelled');
    expect((await release('requeue')).state).toBe('pending');
    const requeued = await claimOne();
    await t.client.release(requeued.id, { leaseToken: requeued.leaseToken, outcome: 'succeeded', exitCode: 0 });

    // A lost lease: back to pending with attempts left, failed when spent, cancelled when asked.
    const lost = await t.client.enqueue({ command: ['true'], queue: 'pull', maxAttempts: 2 });
    await claimOne();
    await expireLease(t, lost.id);
    await until('lost lease back to pending', async () => (await stateOf(t, lost.id)) === 'pending');
    await claimOne();
    await expireLease(t, lost.id);
    await until('lost lease failed', async () => (await stateOf(t, lost.id)) === 'failed');
    const asked = await t.client.enqueue({ command: ['true'], queue: 'pull' });
    await claimOne();
    await t.client.cancel(asked.id);
    await expireLease(t, asked.id);
    await until('lost lease cancelled', async () => (await stateOf(t, asked.id)) === 'cancelled');

    const waiting = await t.client.enqueue({
      command: ['true'],
      queue: 'pull',
      runAt: new Date(Date.now() + 3_600_000).toISOString(),
    });
    expect((await t.client.cancel(waiting.id)).state).toBe('cancelled');
    const nobody = await t.client.enqueue({ command: ['true'], queue: 'nobody', placementDeadlineSeconds: 0.3 });
    await until('unplaceable', async () => (await stateOf(t, nobody.id)) === 'failed');

    // A job handed to a sleeping long-poll goes in already running.
    const poll = t.client.claim(w.id, 1, 10_000);
    await new Promise((r) => setTimeout(r, 300));
    const handed = await t.client.enqueue({ command: ['true'], queue: 'pull' });
    const got = (await poll).jobs[0];
    expect(got.id).toBe(handed.id);
    await t.client.release(got.id, { leaseToken: got.leaseToken, outcome: 'succeeded', exitCode: 0 });

    expect(await asServer(t, (db) => deleteExpiredJobs(db, 0))).toBeGreaterThan(0);
    await gather(t);
  } finally {
    await t.close();
  }
});

test('central mode: assign, start, a stale assignment, cancel of an assigned job', async () => {
  const t = await startTestServer({ placementMode: 'central', workerGoneAfterMs: 60_000 });
  try {
    const w = await t.client.register(worker('c', 'default'));
    const started = await t.client.enqueue({ command: ['true'] });
    await until('assigned', async () => (await stateOf(t, started.id)) === 'assigned');
    expect((await t.client.claim(w.id, 1)).jobs.map((j) => j.id)).toEqual([started.id]);
    const cancelled = await t.client.enqueue({ command: ['true'] });
    await until('assigned', async () => (await stateOf(t, cancelled.id)) === 'assigned');
    expect((await t.client.cancel(cancelled.id)).state).toBe('cancelled');
    const stale = await t.client.enqueue({ command: ['true'] });
    await until('assigned', async () => (await stateOf(t, stale.id)) === 'assigned');
    await t.client.drain(w.id);
    await until('assignment returned', async () => (await stateOf(t, stale.id)) === 'pending');
    await gather(t);
  } finally {
    await t.close();
  }
});

test('the two runs above made exactly the transitions the doc lists', () => {
  expect([...seen].sort()).toEqual([...new Set(documentedTransitions().map(key))].sort());
});

test('a state change the doc does not list fails the test file that made it', async () => {
  const t = await startTestServer();
  try {
    const job = await t.client.enqueue({ command: ['true'] });
    await t.client.cancel(job.id);
    // No server path takes a job out of a final state; a statement that did would be caught.
    await asServer(t, (db) =>
      sql`UPDATE jobs SET state = 'pending', finished_at = NULL WHERE id = ${job.id}`.execute(db),
    );
    await expect(checkTransitions(t.tdb.db)).rejects.toThrow('does not list: cancelled -> pending');
    await sql`DELETE FROM skipjack_test_transitions WHERE from_state = 'cancelled' AND to_state = 'pending'`.execute(
      t.tdb.db,
    );
    // The same change made as a test fixture is not the server's, and is not recorded.
    await sql`UPDATE jobs SET state = 'cancelled' WHERE id = ${job.id}`.execute(t.tdb.db);
    await sql`UPDATE jobs SET state = 'pending' WHERE id = ${job.id}`.execute(t.tdb.db);
    await expect(checkTransitions(t.tdb.db)).resolves.toBeUndefined();
  } finally {
    await t.close();
  }
});
