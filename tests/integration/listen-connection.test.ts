// The LISTEN connection cut half-open (through a proxy that stops forwarding, closing nothing):
// the server notices by its probe, connects again, and a sleeping long-poll still wakes for a job.
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { startTestServer, until, type TestServer } from '../support/server.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

let tdb: TestDatabase;
let proxy: TcpProxy;
let t: TestServer;
beforeAll(async () => {
  tdb = await createTestDatabase();
  const target = new URL(tdb.url);
  proxy = await startTcpProxy(target.hostname, Number(target.port));
  const listenUrl = Object.assign(new URL(tdb.url), { hostname: '127.0.0.1', port: String(proxy.port) }).toString();
  t = await startTestServer({ listenUrl, listenProbeMs: 300 }, tdb);
});
afterAll(async () => {
  await t.close();
  await proxy.close();
});

test('a half-open LISTEN connection is found by its probe and replaced; a sleeping long-poll still wakes', async () => {
  const w = await t.client.register({ name: 'listen', queues: ['listen'] });
  expect(proxy.accepted).toBe(1);
  proxy.freeze();
  await until('a new LISTEN connection', async () => proxy.accepted > 1, 10_000);
  // Asleep for up to 30 s: only a NOTIFY can end it sooner.
  const claim = t.client.claim(w.id, 1, 30_000);
  await new Promise((r) => setTimeout(r, 300));
  // From outside this server (no hand-off): the insert's trigger sends the NOTIFY.
  await sql`INSERT INTO jobs (queue, command) VALUES ('listen', '{true}')`.execute(tdb.db);
  const woke = await Promise.race([claim, new Promise((r) => setTimeout(() => r('still asleep'), 10_000))]);
  expect(woke).toMatchObject({ jobs: [{ queue: 'listen' }] });
}, 30_000);
