// /metrics against a real server: a job run end to end moves the gauges, histograms and counters
// it should, read from the exposition text; made-up URLs and hundreds of new queues do not grow
// the series past their bounds.
import { randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { liveJobsByQueueSql } from '../../server/store/metrics.js';
import { createDb } from '../../server/db.js';
import { createMetrics } from '../../server/metrics/index.js';
import { status } from '../support/api.js';
import { freePort } from '../support/ports.js';
import { startTestServer, until, type TestServer } from '../support/server.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ leaseTtlMs: 4000 });
});
afterAll(async () => {
  await t.close();
});

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The exposition text's samples (comments skipped); label values here hold no escaped quotes. */
async function scrape(): Promise<Sample[]> {
  const res = await fetch(`${t.server.url}/metrics`);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain;.*version=0\.0\.4/);
  return (await res.text())
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
    .map((line) => {
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!m) throw new Error(`not an exposition line: ${line}`);
      const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
      return { name: m[1], labels, value: Number(m[3]) };
    });
}

/** The value of the one sample with this name whose labels include these; 0 when there is none. */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return found.reduce((n, s) => n + s.value, 0);
}

const seriesOf = (samples: Sample[], name: string) => samples.filter((s) => s.name === name);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a job run end to end moves the job gauges, the wait and run histograms, and the worker gauges', async () => {
  const queue = `m-${randomBytes(3).toString('hex')}`;
  const w = await t.client.register({ name: 'metrics-worker', queues: [queue], capacity: { slots: 3 } });
  const job = await t.client.enqueue({ command: ['true'], queue });
  await sleep(400);
  // The scrape's database read is cached for a second: wait for a read that sees the job.
  const before = await until('the pending job in the gauges', async () => {
    const s = await scrape();
    return value(s, 'skipjack_jobs', { queue, state: 'pending' }) === 1 ? s : null;
  });
  expect(value(before, 'skipjack_oldest_pending_seconds', { queue })).toBeGreaterThanOrEqual(0.3);
  expect(value(before, 'skipjack_worker_capacity', { worker: w.id, resource: 'slots' })).toBe(3);
  expect(value(before, 'skipjack_worker_allocated', { worker: w.id, resource: 'slots' })).toBe(0);
  const claimsBefore = value(before, 'skipjack_claim_seconds_count', { long_poll: 'false' });

  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  expect(claimed.id).toBe(job.id);
  const running = await until('the running job in the gauges', async () => {
    const s = await scrape();
    return value(s, 'skipjack_jobs', { queue, state: 'running' }) === 1 ? s : null;
  });
  expect(value(running, 'skipjack_jobs', { queue, state: 'pending' })).toBe(0);
  expect(seriesOf(running, 'skipjack_oldest_pending_seconds').some((s) => s.labels.queue === queue)).toBe(false);
  expect(value(running, 'skipjack_worker_allocated', { worker: w.id, resource: 'slots' })).toBe(1);
  expect(value(running, 'skipjack_queue_wait_seconds_count', { queue })).toBe(1);
  expect(value(running, 'skipjack_queue_wait_seconds_sum', { queue })).toBeGreaterThanOrEqual(0.3);
  expect(value(running, 'skipjack_claim_seconds_count', { long_poll: 'false' })).toBe(claimsBefore + 1);

  await sleep(300);
  await t.client.release(job.id, { leaseToken: claimed.leaseToken, outcome: 'succeeded', exitCode: 0 });
  const after = await until('the job gone from the gauges', async () => {
    const s = await scrape();
    return value(s, 'skipjack_jobs', { queue }) === 0 ? s : null;
  });
  expect(value(after, 'skipjack_run_seconds_count', { queue, outcome: 'succeeded' })).toBe(1);
  expect(value(after, 'skipjack_run_seconds_sum', { queue, outcome: 'succeeded' })).toBeGreaterThanOrEqual(0.25);
  expect(value(after, 'skipjack_worker_allocated', { worker: w.id, resource: 'slots' })).toBe(0);
  expect(value(after, 'skipjack_jobs_enqueued_total', { queue })).toBe(1);
  expect(
    value(after, 'skipjack_http_request_seconds_count', { method: 'POST', route: '/jobs/:id/release', status: '200' }),
  ).toBe(1);

  // A stale token, on a release and on a heartbeat: each 409 counted once.
  const stale0 = value(after, 'skipjack_stale_lease_total');
  const stale = { leaseToken: claimed.leaseToken, outcome: 'succeeded' as const };
  expect(await status(t.client.release(job.id, stale))).toBe(409);
  expect(await status(t.client.request('POST', `/jobs/${job.id}/heartbeat`, { leaseToken: randomUUID() }))).toBe(409);
  expect(value(await scrape(), 'skipjack_stale_lease_total')).toBe(stale0 + 2);

  // A deregistered worker's series go.
  await t.client.deregister(w.id);
  await until('the worker gone from the gauges', async () =>
    value(await scrape(), 'skipjack_worker_capacity', { worker: w.id }) === 0 ? true : null,
  );
});

test('a lease nobody renews is counted by the reaper, and a refused placement by its filter', async () => {
  const queue = `l-${randomBytes(3).toString('hex')}`;
  const w = await t.client.register({ name: 'metrics-lapse', queues: [queue], region: 'here' });
  const expired0 = value(await scrape(), 'skipjack_leases_expired_total');
  await t.client.enqueue({ command: ['true'], queue });
  expect((await t.client.claim(w.id, 1)).jobs).toHaveLength(1);
  await until('the lease to expire', async () =>
    value(await scrape(), 'skipjack_leases_expired_total') === expired0 + 1 ? true : null,
  );

  const refused0 = value(await scrape(), 'skipjack_placement_refusals_total', { reason: 'region' });
  const refusal = t.client.enqueue({ command: ['true'], queue, constraints: { region: 'elsewhere' } });
  expect(await status(refusal)).toBe(422);
  expect(value(await scrape(), 'skipjack_placement_refusals_total', { reason: 'region' })).toBe(refused0 + 1);
  await t.client.deregister(w.id);
});

test('made-up URLs and 500 new queues grow no series past their bounds', async () => {
  const routes = () => new Set(seriesOf(samplesNow, 'skipjack_http_request_seconds_count').map((s) => s.labels.route));
  let samplesNow = await scrape();
  await fetch(`${t.server.url}/no/such/${randomUUID()}`);
  samplesNow = await scrape();
  const routesAfterOne = routes();
  expect(routesAfterOne).toContain('unmatched');
  for (let i = 0; i < 5; i++) expect((await fetch(`${t.server.url}/${randomUUID()}?x=${i}`)).status).toBe(404);
  samplesNow = await scrape();
  expect(routes()).toEqual(routesAfterOne);
  expect([...routes()].every((r) => r === 'unmatched' || r.startsWith('/'))).toBe(true);

  const prefix = `q${randomBytes(3).toString('hex')}`;
  const jobs = Array.from({ length: 500 }, (_, i) => ({ command: ['true'], queue: `${prefix}-${i}` }));
  expect((await t.client.enqueueBatch(jobs)).jobs).toHaveLength(500);
  const s = await until('the 500 queues in the gauges', async () => {
    const x = await scrape();
    return value(x, 'skipjack_jobs', { state: 'pending' }) >= 500 ? x : null;
  });
  const queueValues = (name: string) => new Set(seriesOf(s, name).map((x) => x.labels.queue));
  // The cap is 100 queues of their own, then "other": every job counted, none lost.
  for (const name of ['skipjack_jobs', 'skipjack_jobs_enqueued_total', 'skipjack_oldest_pending_seconds']) {
    expect(queueValues(name).size).toBeLessThanOrEqual(101);
    expect(queueValues(name)).toContain('other');
  }
  const ours = seriesOf(s, 'skipjack_jobs').filter(
    (x) => x.labels.queue.startsWith(prefix) || x.labels.queue === 'other',
  );
  expect(ours.reduce((n, x) => n + x.value, 0)).toBe(500);
  // An enqueue refused for its input names no queue at all.
  expect(await status(t.client.request('POST', '/jobs', { command: [], queue: 'never-stored' }))).toBe(400);
  expect(queueValues('skipjack_jobs_enqueued_total').has('never-stored')).toBe(false);
});

test("Node's default metrics are there", async () => {
  const s = await scrape();
  expect(value(s, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
  expect(seriesOf(s, 'nodejs_heap_size_used_bytes')).toHaveLength(1);
});

test('the scrape reads live jobs by index, not the ended ones: no sequential scan of jobs', async () => {
  // 100,000 ended jobs and a few pending, as a fixture (not state changes the server makes).
  await sql`
    INSERT INTO jobs (command, queue, state, finished_at)
    SELECT ARRAY['true'], 'ended-' || (i % 20), CASE WHEN i % 100 = 0 THEN 'pending' ELSE 'succeeded' END,
      CASE WHEN i % 100 = 0 THEN NULL ELSE now() END
    FROM generate_series(1, 100000) i`.execute(t.tdb.db);
  await sql`ANALYZE jobs`.execute(t.tdb.db);
  const plan = (await sql<{ 'QUERY PLAN': string }>`EXPLAIN ${liveJobsByQueueSql}`.execute(t.tdb.db)).rows
    .map((r) => r['QUERY PLAN'])
    .join('\n');
  expect(plan).not.toMatch(/Seq Scan on jobs/);
  // Each branch reads an index: a partial one on pending jobs, and jobs_held_idx.
  expect(plan.match(/Index (Only )?Scan using jobs_\w+_idx/g)).toHaveLength(2);
  expect(plan).toMatch(/jobs_held_idx/);
  if (process.env.METRICS_EXPLAIN)
    console.log(
      (await sql<{ 'QUERY PLAN': string }>`EXPLAIN ANALYZE ${liveJobsByQueueSql}`.execute(t.tdb.db)).rows
        .map((r) => r['QUERY PLAN'])
        .join('\n'),
    );
  await sql`DELETE FROM jobs WHERE queue LIKE 'ended-%'`.execute(t.tdb.db);
});

test('a database that cannot be read still leaves the process metrics served', async () => {
  const port = await freePort();
  const { db } = createDb(`postgres://nobody@127.0.0.1:${port}/none`);
  const errors: unknown[] = [];
  const m = createMetrics(db, { onError: (e) => errors.push(e) });
  m.samples.claimed([{ id: 1, runs: 1 }]);
  const text = await m.render();
  expect(text).toMatch(/^process_cpu_user_seconds_total /m);
  expect(errors.length).toBeGreaterThanOrEqual(1);
  m.samples.stop();
  await db.destroy();
});
