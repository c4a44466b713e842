// A worker whose heartbeats stop (kill -9, SIGSTOP, a cut cable) is shown as unresponsive after a
// couple of missed heartbeats, and `why` counts it as fitting nothing, long before it is gone.
import { sql } from 'kysely';
import { startTestServer, type TestServer } from '../support/server.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ leaseTtlMs: 30_000 });
});
afterAll(async () => {
  await t.close();
});

const capacity = { cpu: 4000, memoryMb: 4096, diskMb: 10_000, slots: 4 };

test('silent past two and a half heartbeat intervals: unresponsive in the worker list and in why', async () => {
  const quiet = await t.client.register({ name: 'quiet', queues: ['q'], capacity });
  const alive = await t.client.register({ name: 'alive', queues: ['q'], capacity });
  // The last heartbeat 30 s ago: three intervals of 10 s missed, well inside the 90 s before gone.
  await sql`UPDATE workers SET last_seen_at = now() - interval '30 seconds' WHERE id = ${quiet.id}`.execute(t.tdb.db);

  const states = Object.fromEntries((await t.client.workers()).workers.map((w) => [w.name, w.state]));
  expect(states).toEqual({ quiet: 'unresponsive', alive: 'active' });
  expect((await t.client.request<{ state: string }>('GET', `/workers/${quiet.id}`)).state).toBe('unresponsive');

  const job = await t.client.enqueue({ command: ['true'], queue: 'q' });
  const why = await t.client.placement(job.id);
  const verdict = Object.fromEntries(why.verdicts.map((v) => [v.workerName, v]));
  expect(verdict.quiet).toMatchObject({ fits: false, filter: 'worker-active', reason: 'worker unresponsive' });
  expect(verdict.alive.fits).toBe(true);
  expect(why.bestWorkerId).toBe(alive.id);
});

test('a worker heard from within the window is active', async () => {
  const w = await t.client.register({ name: 'fresh', queues: ['f'], capacity });
  await sql`UPDATE workers SET last_seen_at = now() - interval '20 seconds' WHERE id = ${w.id}`.execute(t.tdb.db);
  expect((await t.client.request<{ state: string }>('GET', `/workers/${w.id}`)).state).toBe('active');
});
