// The wire API against a real server and Postgres: enqueue, claim, fencing, release, retries.
import { sql } from 'kysely';
import { once } from 'node:events';
import { connect } from 'node:net';
import pino from 'pino';
import { ApiRequestError, SkipjackClient } from '../../protocol/client.js';
import { startServer } from '../../server/main.js';
import { deregisterWorker } from '../../server/store/workers.js';
import { releaseJobs } from '../../server/store/leases.js';
import { quietLog, startTestServer, until, type TestServer } from '../support/server.js';
import { serverHelpers, sleepingClaim, sleepingLongPolls, status } from '../support/api.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ leaseTtlMs: 1000 });
});
afterAll(async () => {
  await t.close();
});

const { register, insertAndClaimTimes, post } = serverHelpers(() => t);

test('the minimum wire contract: enqueue answers 201 with a pending job', async () => {
  const { status: code, body } = await post('/jobs', { command: ['sh', '-c', 'echo hi'] });
  expect(code).toBe(201);
  expect(body).toMatchObject({ state: 'pending', attempts: 0, exitCode: null });
  expect(typeof body.id).toBe('number');
  const got = await t.client.getJob(body.id);
  expect(got.state).toBe('pending');
});

test('a deregistered worker stays out: its leases are taken back at once, and its heartbeats tell it to stop without bringing it back', async () => {
  const w = await t.client.register({ name: 'deregistered', queues: ['deregistered'] });
  const job = await t.client.enqueue({ command: ['sleep', '60'], queue: 'deregistered', maxAttempts: 3 });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  expect(claimed.id).toBe(job.id);
  expect((await t.client.deregister(w.id)).state).toBe('deregistered');
  // Taken back by the DELETE itself, not by the reaper later: the run is lost, the job pending again.
  expect(await t.client.getJob(job.id)).toMatchObject({
    state: 'pending',
    endReason: 'lost',
    error: 'the worker was deregistered',
  });
  const lease = { jobId: job.id, leaseToken: claimed.leaseToken };
  // Said in words a worker of any version acts on: the lease is lost, and it is to drain.
  expect(await t.client.workerHeartbeat(w.id, [lease])).toEqual({
    cancel: [],
    lost: [job.id],
    drain: true,
    deregistered: true,
  });
  // Before, a heartbeat made a deregistered worker active again, its lease extended.
  expect((await t.client.request<{ state: string }>('GET', `/workers/${w.id}`)).state).toBe('deregistered');
  expect(await status(t.client.drain(w.id))).toBe(409);
  expect((await t.client.workers()).workers.map((x) => x.id)).not.toContain(w.id);
  expect(
    await status(t.client.release(job.id, { leaseToken: claimed.leaseToken, outcome: 'succeeded', exitCode: 0 })),
  ).toBe(409);
  expect((await t.client.claim(w.id, 1)).jobs).toEqual([]);
  // Deregistering again changes nothing and is no error.
  expect((await t.client.deregister(w.id)).state).toBe('deregistered');
  expect((await t.client.getJob(job.id)).state).toBe('pending');
});

test('a drain outlasts silence: a worker marked gone that heartbeats again comes back draining, not active', async () => {
  const w = await t.client.register({ name: 'drain-silent', queues: ['drain-silent'] });
  await t.client.drain(w.id);
  await sql`UPDATE workers SET last_seen_at = now() - interval '1 hour' WHERE id = ${w.id}`.execute(t.tdb.db);
  const stateOf = async () =>
    (await sql<{ state: string }>`SELECT state FROM workers WHERE id = ${w.id}`.execute(t.tdb.db)).rows[0].state;
  await until('the reaper to mark the worker gone', async () => (await stateOf()) === 'gone');
  expect(await t.client.workerHeartbeat(w.id, [])).toMatchObject({ drain: true });
  expect(await stateOf()).toBe('draining');
  await t.client.enqueue({ command: ['true'], queue: 'drain-silent', allowUnplaceable: true });
  expect((await t.client.claim(w.id, 1)).jobs).toEqual([]);
});

test('a deregistration and a release batch of the same jobs, at once, do not deadlock: both lock jobs in id order', async () => {
  // A worker sends its outcomes in the order its jobs ended, not in id order.
  for (let round = 0; round < 10; round++) {
    const queue = `deadlock-${round}`;
    const w = await t.client.register({ name: queue, queues: [queue], capacity: { slots: 300 } });
    await t.client.enqueueBatch(Array.from({ length: 300 }, () => ({ command: ['true'], queue })));
    const { jobs } = await t.client.claim(w.id, 300);
    expect(jobs).toHaveLength(300);
    const releases = jobs
      .reverse()
      .map((j) => ({ jobId: j.id, leaseToken: j.leaseToken, outcome: 'succeeded' as const, exitCode: 0 }));
    const [released, { reaped }] = await Promise.all([
      releaseJobs(t.tdb.db, releases),
      deregisterWorker(t.tdb.db, w.id),
    ]);
    // Each job either finished by its release or was taken back: never both, never neither.
    expect(released.size + reaped.length).toBe(300);
  }
});

test('claim, heartbeat, log, release: the happy path, and fencing against a stale token', async () => {
  await sql`UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE state = 'pending'`.execute(t.tdb.db);
  const w = await register();
  const w2 = await t.client.register({ name: 'w2', queues: ['fence'] });
  const job = await t.client.enqueue({ command: ['echo', 'hi'], queue: 'fence' });
  const { jobs } = await t.client.claim(w2.id, 5);
  expect(jobs.map((j) => j.id)).toEqual([job.id]);
  const lease = jobs[0].leaseToken;
  expect(await status(t.client.claim(w.id, 5).then((r) => expect(r.jobs).toEqual([])))).toBe(200);
  await t.client.appendLogs(job.id, lease, [
    { offset: 0, stream: 'stdout', data: Buffer.from('hi\n').toString('base64') },
  ]);
  // Let the lease lapse; the reaper returns the job and another claim takes it.
  await until('lease reaped', async () => (await t.client.getJob(job.id)).state === 'pending');
  const again = await t.client.claim(w2.id, 1);
  expect(again.jobs[0].id).toBe(job.id);
  expect(again.jobs[0].leaseToken).not.toBe(lease);
  // The old token changes nothing, on every lease route.
  expect(await status(t.client.release(job.id, { leaseToken: lease, outcome: 'succeeded', exitCode: 0 }))).toBe(409);
  expect(await status(t.client.appendLogs(job.id, lease, [{ offset: 0, data: 'eA==' }]))).toBe(409);
  expect(await status(t.client.request('POST', `/jobs/${job.id}/heartbeat`, { leaseToken: lease }))).toBe(409);
  // Out-of-range numbers are bad input, not a database error.
  expect(
    await status(
      t.client.release(job.id, { leaseToken: again.jobs[0].leaseToken, outcome: 'failed', exitCode: 2 ** 40 }),
    ),
  ).toBe(400);
  const still = await t.client.getJob(job.id);
  expect(still).toMatchObject({ state: 'running', exitCode: null, workerId: w2.id });
  // The run in progress is listed with the ended ones, without an outcome yet.
  const during = (
    await t.client.request<{ attempts: { attempt: number; outcome: string | null; workerId: string }[] }>(
      'GET',
      `/jobs/${job.id}/attempts`,
    )
  ).attempts;
  expect(during.map((a) => [a.attempt, a.outcome, a.workerId])).toEqual([
    [1, 'lost', w2.id],
    [2, null, w2.id],
  ]);
  const done = await t.client.release(job.id, {
    leaseToken: again.jobs[0].leaseToken,
    outcome: 'succeeded',
    exitCode: 0,
  });
  expect(done.state).toBe('succeeded');
  const attempts = (await t.client.request<{ attempts: { outcome: string }[] }>('GET', `/jobs/${job.id}/attempts`))
    .attempts;
  expect(attempts.map((a) => a.outcome)).toEqual(['lost', 'succeeded']);
});

test('a failed run retries with backoff, then fails after maxAttempts', async () => {
  const w = await t.client.register({ name: 'retrier', queues: ['retry'] });
  const job = await t.client.enqueue({ command: ['false'], queue: 'retry', maxAttempts: 2, retryBackoffSeconds: 0.5 });
  const [first] = (await t.client.claim(w.id, 1)).jobs;
  const afterFirst = await t.client.release(job.id, { leaseToken: first.leaseToken, outcome: 'failed', exitCode: 1 });
  expect(afterFirst.state).toBe('pending');
  // Jitter takes at most half off: the retry is due 0.25-0.5 s later, so not claimable at once.
  const delay = Date.parse(afterFirst.runAt) - Date.now();
  expect(delay).toBeGreaterThan(100);
  expect((await t.client.claim(w.id, 1)).jobs).toEqual([]);
  const [second] = (await t.client.claim(w.id, 1, 5000)).jobs;
  expect(second.id).toBe(job.id);
  expect(second.attempt).toBe(2);
  const final = await t.client.release(job.id, { leaseToken: second.leaseToken, outcome: 'failed', exitCode: 3 });
  expect(final).toMatchObject({ state: 'failed', exitCode: 3, attempts: 2 });
  type Run = { attempt: number; outcome: string; workerId: string; exitCode: number; endedAt: string | null };
  const runs = (await t.client.request<{ attempts: Run[] }>('GET', `/jobs/${job.id}/attempts`)).attempts;
  expect(runs.map((r) => [r.attempt, r.outcome, r.workerId, r.exitCode, r.endedAt !== null])).toEqual([
    [1, 'failed', w.id, 1, true],
    [2, 'failed', w.id, 3, true],
  ]);
  // The run that ended the job is kept in the job's row alone (migration 008); the retried one was written out.
  const stored = (
    await sql<{ attempt: number }>`SELECT attempt FROM job_attempts WHERE job_id = ${job.id}`.execute(t.tdb.db)
  ).rows;
  expect(stored.map((r) => r.attempt)).toEqual([1]);
});

test('cancel: a pending job at once; a running job is flagged for its worker', async () => {
  const w = await t.client.register({ name: 'c', queues: ['cancel'] });
  const pending = await t.client.enqueue({
    command: ['sleep', '1'],
    queue: 'cancel',
    runAt: new Date(Date.now() + 60_000).toISOString(),
  });
  expect((await t.client.cancel(pending.id)).state).toBe('cancelled');
  expect(await status(t.client.cancel(pending.id))).toBe(409);
  const running = await t.client.enqueue({ command: ['sleep', '1'], queue: 'cancel' });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  expect(claimed.id).toBe(running.id);
  expect((await t.client.cancel(running.id)).state).toBe('running');
  const hb = await t.client.workerHeartbeat(w.id, [{ jobId: running.id, leaseToken: claimed.leaseToken }]);
  expect(hb.cancel).toEqual([running.id]);
  // Even a worker that reports "failed" for a cancelled job ends it cancelled, not retried.
  const ended = await t.client.release(running.id, {
    leaseToken: claimed.leaseToken,
    outcome: 'failed',
    signal: 'SIGTERM',
  });
  expect(ended.state).toBe('cancelled');
});

test('a long-poll claim is woken by NOTIFY when a job arrives through another server', async () => {
  const w = await t.client.register({ name: 'lp', queues: ['lp'] });
  const other = await startServer({ ...t.config, port: 0 }, quietLog);
  try {
    const started = Date.now();
    const { answer: claim } = await sleepingClaim(t.client, t.server.url, w.id, 1, 10_000);
    const job = await new SkipjackClient({ baseUrl: other.url }).enqueue({ command: ['true'], queue: 'lp' });
    const { jobs } = await claim;
    expect(jobs.map((j) => j.id)).toEqual([job.id]);
    expect(Date.now() - started).toBeLessThan(9_000);
    // Two transactions: the claim began after the insert had committed.
    const { created_at, started_at } = await insertAndClaimTimes(job.id);
    expect(started_at.getTime()).toBeGreaterThan(created_at.getTime());
  } finally {
    await other.close();
  }
});

test("a newer claim from a worker ends its older long-poll at once, and jobs go to the newer one (the older one's caller is gone: a proxy may keep its request open)", async () => {
  const queue = 'superseded';
  const w = await t.client.register({ name: queue, queues: [queue] });
  const { answer: older } = await sleepingClaim(t.client, t.server.url, w.id, 4, 10_000);
  const asleep = await sleepingLongPolls(t.server.url);
  const started = Date.now();
  const newer = t.client.claim(w.id, 4, 10_000);
  expect((await older).jobs).toEqual([]);
  expect(Date.now() - started).toBeLessThan(5_000);
  await until('the newer long-poll asleep', async () => (await sleepingLongPolls(t.server.url)) === asleep);
  const job = await t.client.enqueue({ command: ['true'], queue });
  expect((await newer).jobs.map((j) => j.id)).toEqual([job.id]);
});

test('a job that was already waiting for its run time when the server started still wakes a long-poll', async () => {
  const queue = `due-${Date.now()}`;
  await sql`INSERT INTO jobs (command, queue, run_at) VALUES (ARRAY['true'], ${queue}, now() + interval '1 second')`.execute(
    t.tdb.db,
  );
  const other = await startServer({ ...t.config, port: 0 }, quietLog);
  try {
    const client = new SkipjackClient({ baseUrl: other.url });
    const w = await client.register({ name: 'due', queues: [queue] });
    const started = Date.now();
    const { jobs } = await client.claim(w.id, 1, 8000);
    expect(jobs).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(6000);
  } finally {
    await other.close();
  }
});

test('heartbeats from many workers at once each get their own answer', async () => {
  const ws = await Promise.all(
    Array.from({ length: 5 }, (_, i) => t.client.register({ name: `hb${i}`, queues: [`hb${i}`] })),
  );
  const jobs = await Promise.all(ws.map((w, i) => t.client.enqueue({ command: ['true'], queue: `hb${i}` })));
  const claims = await Promise.all(ws.map((w) => t.client.claim(w.id, 1)));
  await t.client.cancel(jobs[2].id);
  const answers = await Promise.all(
    ws.map((w, i) =>
      t.client.workerHeartbeat(w.id, [
        { jobId: claims[i].jobs[0].id, leaseToken: claims[i].jobs[0].leaseToken },
        // A lease this worker does not hold: another worker's job.
        { jobId: claims[(i + 1) % 5].jobs[0].id, leaseToken: claims[(i + 1) % 5].jobs[0].leaseToken },
      ]),
    ),
  );
  answers.forEach((a, i) => {
    expect(a.cancel).toEqual(i === 2 ? [jobs[2].id] : []);
    expect(a.lost).toEqual([claims[(i + 1) % 5].jobs[0].id]);
    expect(a.drain).toBe(false);
  });
  const unknown = await fetch(`${t.server.url}/workers/00000000-0000-4000-8000-000000000000/heartbeat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  // A code of its own, which a worker tells from a proxy's 404 and registers again on.
  expect([unknown.status, (await unknown.json()).error]).toEqual([404, 'unknown_worker']);
});

test('secret env values are masked in every answer but the claim', async () => {
  const w = await t.client.register({ name: 'secret', queues: ['secret'] });
  const job = await t.client.enqueue({
    command: ['true'],
    queue: 'secret',
    env: { TOKEN: 's3cr3t', MODE: 'x' },
    secretEnv: ['TOKEN'],
  });
  expect(job.env).toEqual({ TOKEN: '***', MODE: 'x' });
  expect((await t.client.getJob(job.id)).env.TOKEN).toBe('***');
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  expect(claimed.env.TOKEN).toBe('s3cr3t');
});

test('a claim can carry the releases of finished jobs; their room counts in that claim', async () => {
  const w = await t.client.register({ name: 'carry', queues: ['carry'], capacity: { slots: 1 } });
  const a = await t.client.enqueue({ command: ['true'], queue: 'carry' });
  const [claimedA] = (await t.client.claim(w.id, 1)).jobs;
  const b = await t.client.enqueue({ command: ['true'], queue: 'carry' });
  // Full: without the release, nothing more fits.
  expect((await t.client.claim(w.id, 1)).jobs).toEqual([]);
  const answer = await t.client.claim(w.id, 1, 0, undefined, [
    { jobId: a.id, leaseToken: claimedA.leaseToken, outcome: 'succeeded', exitCode: 0 },
    { jobId: b.id, leaseToken: claimedA.leaseToken, outcome: 'succeeded', exitCode: 0 }, // not b's lease
  ]);
  expect(answer.releases?.map((r) => [r.jobId, r.ok])).toEqual([
    [a.id, true],
    [b.id, false],
  ]);
  expect(answer.jobs.map((j) => j.id)).toEqual([b.id]);
  expect((await t.client.getJob(a.id)).state).toBe('succeeded');
});

test('releases carried by a claim for an unknown worker still count; the claim is a 404', async () => {
  const w = await t.client.register({ name: 'carry-404', queues: ['carry-404'], capacity: { slots: 1 } });
  const a = await t.client.enqueue({ command: ['true'], queue: 'carry-404' });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  const stranger = '00000000-0000-4000-8000-000000000000';
  const refused = await t.client
    .claim(stranger, 1, 0, undefined, [
      { jobId: a.id, leaseToken: claimed.leaseToken, outcome: 'succeeded', exitCode: 0 },
    ])
    .catch((e: ApiRequestError) => e);
  expect([(refused as ApiRequestError).status, (refused as ApiRequestError).code]).toEqual([404, 'unknown_worker']);
  expect(await status(t.client.claim(stranger, 1))).toBe(404);
  expect((await t.client.getJob(a.id)).state).toBe('succeeded');
});

test('a stop does not wait on a connection that never sent a request, nor cut one that is idle', async () => {
  const warnings: string[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
  // A grace longer than this test may take: waiting it out would fail the test.
  const other = await startServer({ ...t.config, port: 0, stopGraceMs: 120_000 }, log);
  const { port } = new URL(other.url);
  const silent = connect(Number(port), '127.0.0.1');
  await once(silent, 'connect');
  const client = new SkipjackClient({ baseUrl: other.url });
  await client.workers(); // a keep-alive connection, idle once answered
  const silentClosed = once(silent, 'close');
  await other.close();
  await silentClosed;
  expect(warnings).toEqual([]);
});
