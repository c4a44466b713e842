// The wire API against a real server and Postgres: enqueue, claim, fencing, release, retries.
import { sql } from 'kysely';
import { once } from 'node:events';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import pg from 'pg';
import pino from 'pino';
import { ApiRequestError, SkipjackClient } from '../../protocol/client.js';
import { startServer } from '../../server/main.js';
import { deleteExpiredJobs } from '../../server/store/reaper.js';
import { deregisterWorker, workerHeartbeats } from '../../server/store/workers.js';
import { releaseJobs } from '../../server/store/leases.js';
import { compileHandOff, handOffStatement } from '../../server/store/claims.js';
import { toInsertRow } from '../../server/store/jobs.js';
import { enqueueJobSchema } from '../../protocol/schemas.js';
import { PreparedStatements } from '../../server/store/prepared.js';
import { quietLog, startTestServer, until, type TestServer } from '../support/server.js';

let t: TestServer;
beforeAll(async () => { t = await startTestServer({ leaseTtlMs: 1000 }); });
afterAll(async () => { await t.close(); });

const register = (name = 'w') => t.client.register({ name, capacity: { cpu: 4000, memoryMb: 4096, diskMb: 10000, slots: 8 } });
const status = async (p: Promise<unknown>) => p.then(() => 200, (e: ApiRequestError) => e.status);

const metric = async (url: string, name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(await (await fetch(`${url}/metrics`)).text())?.[1] ?? NaN);
const sleepingLongPolls = (url: string) => metric(url, 'skipjack_long_polls_sleeping');
const handedOff = () => metric(t.server.url, 'skipjack_jobs_handed_off_total');
/** Starts a long-poll claim and resolves, with its answer to come, once the server counts it asleep. */
async function sleepingClaim(client: SkipjackClient, url: string, workerId: string, max: number, waitMs: number) {
  const before = await sleepingLongPolls(url);
  const answer = client.claim(workerId, max, waitMs);
  await until('the long-poll to sleep', async () => (await sleepingLongPolls(url)) > before);
  return { answer };
}
const insertAndClaimTimes = async (id: number) =>
  (await sql<{ created_at: Date; started_at: Date }>`SELECT created_at, started_at FROM jobs WHERE id = ${id}`.execute(t.tdb.db)).rows[0];

async function post(path: string, body: unknown) {
  const res = await fetch(t.server.url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

test('the minimum wire contract: enqueue answers 201 with a pending job', async () => {
  const { status: code, body } = await post('/jobs', { command: ['sh', '-c', 'echo hi'] });
  expect(code).toBe(201);
  expect(body).toMatchObject({ state: 'pending', attempts: 0, exitCode: null });
  expect(typeof body.id).toBe('number');
  const got = await t.client.getJob(body.id);
  expect(got.state).toBe('pending');
});

test('bad input is a 400 that names the field, and changes nothing', async () => {
  const count = async () => Number((await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs`.execute(t.tdb.db)).rows[0].n);
  const before = await count();
  const cases: [unknown, string][] = [
    [{ command: 'echo hi' }, 'body.command'],
    [{ command: [] }, 'body.command'],
    [{ command: ['x'], priority: 'high' }, 'body.priority'],
    [{ command: ['x'], maxAttempts: 0 }, 'body.maxAttempts'],
    [{ command: ['x'], constraints: { region: 5 } }, 'body.constraints.region'],
    [{ command: ['x'], bogus: 1 }, 'body'],
    [{ jobs: [{ command: ['ok'] }, { command: 'bad' }] }, 'body.jobs.1.command'],
    [{ command: ['echo', 'a\u0000b'] }, 'body.command.1'],
    [{ command: ['x'], runAt: '0000-01-01T00:00:00Z' }, 'body.runAt'],
    [{ command: ['x'], cwd: '/'.repeat(5000) }, 'body.cwd'],
    // Below the smallest a real column holds: PostgreSQL refused these with a 500.
    [{ command: ['x'], timeoutSeconds: 1e-300 }, 'body.timeoutSeconds'],
    [{ command: ['x'], retryBackoffSeconds: 1e-300 }, 'body.retryBackoffSeconds'],
    [{ command: ['x'], killGraceSeconds: 1e-300 }, 'body.killGraceSeconds'],
    [{ command: ['x'], killSignal: 'SIGFOO' }, 'body.killSignal'],
    // Parsed as the object's prototype, the key would vanish and the constraint with it.
    [JSON.parse('{"command":["x"],"constraints":{"labels":{"__proto__":"gpu"}}}'), 'body.constraints.labels.__proto__'],
    [JSON.parse('{"command":["x"],"env":{"__proto__":"x"}}'), 'body.env.__proto__'],
    // The second job would be answered with the first and never stored.
    [{ jobs: [{ command: ['a'], idempotencyKey: 'twice' }, { command: ['b'], idempotencyKey: 'twice' }] }, 'body.jobs.1.idempotencyKey'],
    // A lone surrogate is valid JSON, not valid text: jsonb refused these with a 500.
    ['{"command":["x"],"env":{"A":"\\ud800"}}', 'body.env.A'],
    ['{"command":["x"],"constraints":{"region":"\\ud800"}}', 'body.constraints.region'],
    ['{"command":["x"],"restart":{"\\udc00":1}}', 'body.restart.'],
    // Nesting that a recursive walk paid for with its stack (a 500).
    [`{"command":["x"],"env":{"A":${'['.repeat(20_000)}${']'.repeat(20_000)}}}`, 'body.env.A.0.0'],
  ];
  for (const [body, field] of cases) {
    const res = await post('/jobs', body);
    expect([res.status, res.body.error, res.body.message]).toEqual([400, 'invalid_request', expect.stringContaining(field)]);
  }
  const withKey = await fetch(`${t.server.url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'one-for-all' }, body: JSON.stringify({ jobs: [{ command: ['a'] }] }) });
  expect([withKey.status, (await withKey.json()).message]).toEqual([400, expect.stringContaining('headers.idempotency-key')]);
  const plain = await fetch(`${t.server.url}/jobs`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{"command":["x"]}' });
  expect([plain.status, (await plain.json()).message]).toEqual([415, expect.stringContaining('content-type: text/plain')]);
  const broken = await post('/jobs', '{"command": [');
  expect([broken.status, broken.body.error]).toEqual([400, 'invalid_json']);
  expect(broken.body.message).toMatch(/^body: not valid JSON/);
  // Valid JSON, but no object: said so, not called invalid JSON.
  for (const [text, got] of [['null', 'null'], ['3', 'number'], ['"x"', 'string']]) {
    expect(await post('/jobs', text)).toMatchObject({ status: 400, body: { error: 'invalid_request', message: `body: expected a JSON object, got ${got}` } });
  }
  // Digits only: 0x10 is not job 16, nor 1e3 job 1000.
  for (const id of ['abc', '0x10', '1e3', '%201', '-1', '0', '99999999999999999999']) {
    expect([id, (await fetch(`${t.server.url}/jobs/${id}`)).status]).toEqual([id, 400]);
  }
  expect((await fetch(`${t.server.url}/jobs/999999`)).status).toBe(404);
  expect((await fetch(`${t.server.url}/jobs/999999/logs?attempt=99999999999`)).status).toBe(400);
  expect(await count()).toBe(before);
});

test('a JSON body is read alike however it comes: a charset, a byte order mark, gzip; another charset is a 415', async () => {
  const send = (body: string | Blob, headers: Record<string, string>) =>
    fetch(`${t.server.url}/jobs`, { method: 'POST', headers, body });
  const job = JSON.stringify({ command: ['true'], queue: 'bodies' });
  for (const [body, headers] of [
    [job, { 'content-type': 'application/json; charset=UTF-8' }],
    [`\ufeff${job}`, { 'content-type': 'application/json' }],
    [new Blob([new Uint8Array(gzipSync(job))]), { 'content-type': 'application/json', 'content-encoding': 'gzip' }],
    [` \n${job}`, { 'content-type': 'Application/JSON' }],
  ] as const) {
    const res = await send(body, headers);
    expect([res.status, (await res.json()).queue]).toEqual([201, 'bodies']);
  }
  const latin = await send(job, { 'content-type': 'application/json; charset=latin1' });
  expect(latin.status).toBe(415);
  const array = await send('[1]', { 'content-type': 'application/json' });
  expect([array.status, (await array.json()).message]).toEqual([400, expect.stringContaining('body')]);
});

test('a JSON body its client cuts off half-way is no error of the server, and stores nothing', async () => {
  const errors: string[] = [];
  const log = pino({ level: 'error' }, { write: (line: string) => void errors.push(JSON.parse(line).msg) });
  const other = await startServer({ ...t.config, port: 0 }, log);
  const stored = async () => Number((await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs WHERE queue = 'cut-off'`.execute(t.tdb.db)).rows[0].n);
  try {
    const socket = connect(Number(new URL(other.url).port), '127.0.0.1');
    await once(socket, 'connect');
    socket.write('POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"command":["true"],"queue":"cut-off"');
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await stored()).toBe(0);
    // And the server goes on answering.
    const job = await new SkipjackClient({ baseUrl: other.url }).enqueue({ command: ['true'], queue: 'cut-off' });
    expect([job.queue, await stored()]).toEqual(['cut-off', 1]);
    expect(errors).toEqual([]);
  } finally {
    await other.close();
  }
});

test('a release naming a job twice, or with a NUL in its signal, is a 400 and changes nothing', async () => {
  const w = await t.client.register({ name: 'twice', queues: ['twice'] });
  const job = await t.client.enqueue({ command: ['true'], queue: 'twice' });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  const item = { jobId: claimed.id, leaseToken: claimed.leaseToken, outcome: 'succeeded', exitCode: 0 };
  const cases: [string, unknown, string][] = [
    ['/releases', { releases: [item, { ...item, outcome: 'failed' }] }, 'body.releases.1.jobId'],
    ['/claims', { workerId: w.id, max: 1, releases: [item, item] }, 'body.releases.1.jobId'],
    ['/releases', { releases: [{ ...item, signal: 'SIG\u0000KILL' }] }, 'body.releases.0.signal'],
    [`/jobs/${job.id}/release`, { ...item, jobId: undefined, signal: 'SIG\u0000KILL' }, 'body.signal'],
    [`/jobs/${job.id}/restart`, { leaseToken: claimed.leaseToken, signal: 'SIG\u0000KILL' }, 'body.signal'],
  ];
  for (const [path, body, field] of cases) {
    const res = await post(path, body);
    expect([path, res.status, res.body.message]).toEqual([path, 400, expect.stringContaining(field)]);
  }
  expect((await t.client.getJob(job.id)).state).toBe('running');
});

test('a restart is refused for a job whose policy does not restart it, and changes nothing', async () => {
  const w = await t.client.register({ name: 'no-restart', queues: ['no-restart'] });
  const job = await t.client.enqueue({ command: ['true'], queue: 'no-restart' });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  const refused = await post(`/jobs/${job.id}/restart`, { leaseToken: claimed.leaseToken, exitCode: 1 });
  expect([refused.status, refused.body.error]).toEqual([409, 'no_restart_policy']);
  const odd = await post(`/jobs/${job.id}/restart`, { leaseToken: claimed.leaseToken, reason: 'unplaceable' });
  expect([odd.status, odd.body.message]).toEqual([400, expect.stringContaining('body.reason')]);
  // Only the run in progress: no run was closed as restarted.
  expect((await (await fetch(`${t.server.url}/jobs/${job.id}/attempts`)).json()).attempts).toHaveLength(1);
  expect((await t.client.getJob(job.id)).state).toBe('running');
});

test('a restart sent again after the server recorded it gets the same answer and opens no second run', async () => {
  const w = await t.client.register({ name: 'restart-twice', queues: ['restart-twice'] });
  const job = await t.client.enqueue({ command: ['true'], queue: 'restart-twice', restart: { policy: 'always' } });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  const report = { leaseToken: claimed.leaseToken, run: claimed.attempt, exitCode: 0 };
  const first = await post(`/jobs/${job.id}/restart`, report);
  const again = await post(`/jobs/${job.id}/restart`, report);
  expect([first.status, first.body]).toEqual([200, { run: claimed.attempt + 1 }]);
  expect([again.status, again.body]).toEqual([200, { run: claimed.attempt + 1 }]);
  // One run closed as restarted, and the one in progress.
  const runs = (await (await fetch(`${t.server.url}/jobs/${job.id}/attempts`)).json()).attempts;
  expect(runs.map((r: { outcome: string | null }) => r.outcome)).toEqual(['restarted', null]);
  // A run that is neither the current one nor the one before is refused, naming the field.
  const stale = await post(`/jobs/${job.id}/restart`, { ...report, run: claimed.attempt + 5 });
  expect([stale.status, stale.body.error, stale.body.message]).toEqual([409, 'run_mismatch', expect.stringContaining('body.run')]);
  expect((await t.client.getJob(job.id)).state).toBe('running');
});

test('a worker registers only queues a job can name, and labels with a value', async () => {
  for (const [body, field] of [
    [{ name: 'w', queues: ['Bad Queue!'] }, 'body.queues.0'],
    [{ name: 'w', labels: { gpu: '' } }, 'body.labels.gpu'],
    [JSON.parse('{"name":"w","labels":{"__proto__":"x"}}'), 'body.labels.__proto__'],
    ['{"name":"w","labels":{"k":"\\udc00"}}', 'body.labels.k'],
  ] as [unknown, string][]) {
    const res = await post('/workers', body);
    expect([res.status, res.body.message]).toEqual([400, expect.stringContaining(field)]);
  }
});

test('a batch larger than one statement can carry is stored whole', async () => {
  const { status: code, body } = await post('/jobs', { jobs: Array.from({ length: 3000 }, (_, i) => ({ command: ['true'], queue: 'big-batch', env: { I: String(i) } })) });
  expect(code).toBe(201);
  expect(body.jobs).toHaveLength(3000);
  expect(body.jobs[2999].env).toEqual({ I: '2999' });
});

test('an idempotency key makes a repeat return the first job', async () => {
  const first = await post('/jobs', { command: ['true'], idempotencyKey: 'deploy-42' });
  const again = await post('/jobs', { command: ['true'], idempotencyKey: 'deploy-42' });
  expect(first.status).toBe(201);
  expect(again.status).toBe(200);
  expect(again.body.id).toBe(first.body.id);
  const viaHeader = await fetch(`${t.server.url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'hdr-1' }, body: JSON.stringify({ command: ['true'] }) });
  const viaHeaderAgain = await fetch(`${t.server.url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'hdr-1' }, body: JSON.stringify({ command: ['true'] }) });
  expect((await viaHeader.json()).id).toBe((await viaHeaderAgain.json()).id);
  const n = (await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs WHERE idempotency_key IN ('deploy-42', 'hdr-1')`.execute(t.tdb.db)).rows[0].n;
  expect(n).toBe(2);
});

test('a deregistered worker stays out: its leases are taken back at once, and its heartbeats tell it to stop without bringing it back', async () => {
  const w = await t.client.register({ name: 'deregistered', queues: ['deregistered'] });
  const job = await t.client.enqueue({ command: ['sleep', '60'], queue: 'deregistered', maxAttempts: 3 });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  expect(claimed.id).toBe(job.id);
  expect((await t.client.deregister(w.id)).state).toBe('deregistered');
  // Taken back by the DELETE itself, not by the reaper later: the run is lost, the job pending again.
  expect(await t.client.getJob(job.id)).toMatchObject({ state: 'pending', endReason: 'lost', error: 'the worker was deregistered' });
  const lease = { jobId: job.id, leaseToken: claimed.leaseToken };
  // Said in words a worker of any version acts on: the lease is lost, and it is to drain.
  expect(await t.client.workerHeartbeat(w.id, [lease])).toEqual({ cancel: [], lost: [job.id], drain: true, deregistered: true });
  // Before, a heartbeat made a deregistered worker active again, its lease extended.
  expect((await t.client.request<{ state: string }>('GET', `/workers/${w.id}`)).state).toBe('deregistered');
  expect(await status(t.client.drain(w.id))).toBe(409);
  expect((await t.client.workers()).workers.map((x) => x.id)).not.toContain(w.id);
  expect(await status(t.client.release(job.id, { leaseToken: claimed.leaseToken, outcome: 'succeeded', exitCode: 0 }))).toBe(409);
  expect((await t.client.claim(w.id, 1)).jobs).toEqual([]);
  // Deregistering again changes nothing and is no error.
  expect((await t.client.deregister(w.id)).state).toBe('deregistered');
  expect((await t.client.getJob(job.id)).state).toBe('pending');
});

test('a drain outlasts silence: a worker marked gone that heartbeats again comes back draining, not active', async () => {
  const w = await t.client.register({ name: 'drain-silent', queues: ['drain-silent'] });
  await t.client.drain(w.id);
  await sql`UPDATE workers SET last_seen_at = now() - interval '1 hour' WHERE id = ${w.id}`.execute(t.tdb.db);
  const stateOf = async () => (await sql<{ state: string }>`SELECT state FROM workers WHERE id = ${w.id}`.execute(t.tdb.db)).rows[0].state;
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
    const releases = jobs.reverse().map((j) => ({ jobId: j.id, leaseToken: j.leaseToken, outcome: 'succeeded' as const, exitCode: 0 }));
    const [released, { reaped }] = await Promise.all([releaseJobs(t.tdb.db, releases), deregisterWorker(t.tdb.db, w.id)]);
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
  await t.client.appendLogs(job.id, lease, [{ offset: 0, stream: 'stdout', data: Buffer.from('hi\n').toString('base64') }]);
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
  expect(await status(t.client.release(job.id, { leaseToken: again.jobs[0].leaseToken, outcome: 'failed', exitCode: 2 ** 40 }))).toBe(400);
  const still = await t.client.getJob(job.id);
  expect(still).toMatchObject({ state: 'running', exitCode: null, workerId: w2.id });
  // The run in progress is listed with the ended ones, without an outcome yet.
  const during = (await t.client.request<{ attempts: { attempt: number; outcome: string | null; worker_id: string }[] }>('GET', `/jobs/${job.id}/attempts`)).attempts;
  expect(during.map((a) => [a.attempt, a.outcome, a.worker_id])).toEqual([[1, 'lost', w2.id], [2, null, w2.id]]);
  const done = await t.client.release(job.id, { leaseToken: again.jobs[0].leaseToken, outcome: 'succeeded', exitCode: 0 });
  expect(done.state).toBe('succeeded');
  const attempts = (await t.client.request<{ attempts: { outcome: string }[] }>('GET', `/jobs/${job.id}/attempts`)).attempts;
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
  type Run = { attempt: number; outcome: string; worker_id: string; exit_code: number; ended_at: string | null };
  const runs = (await t.client.request<{ attempts: Run[] }>('GET', `/jobs/${job.id}/attempts`)).attempts;
  expect(runs.map((r) => [r.attempt, r.outcome, r.worker_id, r.exit_code, r.ended_at !== null])).toEqual([[1, 'failed', w.id, 1, true], [2, 'failed', w.id, 3, true]]);
  // The run that ended the job is kept in the job's row alone (migration 008); the retried one was written out.
  const stored = (await sql<{ attempt: number }>`SELECT attempt FROM job_attempts WHERE job_id = ${job.id}`.execute(t.tdb.db)).rows;
  expect(stored.map((r) => r.attempt)).toEqual([1]);
});

test('cancel: a pending job at once; a running job is flagged for its worker', async () => {
  const w = await t.client.register({ name: 'c', queues: ['cancel'] });
  const pending = await t.client.enqueue({ command: ['sleep', '1'], queue: 'cancel', runAt: new Date(Date.now() + 60_000).toISOString() });
  expect((await t.client.cancel(pending.id)).state).toBe('cancelled');
  expect(await status(t.client.cancel(pending.id))).toBe(409);
  const running = await t.client.enqueue({ command: ['sleep', '1'], queue: 'cancel' });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  expect(claimed.id).toBe(running.id);
  expect((await t.client.cancel(running.id)).state).toBe('running');
  const hb = await t.client.workerHeartbeat(w.id, [{ jobId: running.id, leaseToken: claimed.leaseToken }]);
  expect(hb.cancel).toEqual([running.id]);
  // Even a worker that reports "failed" for a cancelled job ends it cancelled, not retried.
  const ended = await t.client.release(running.id, { leaseToken: claimed.leaseToken, outcome: 'failed', signal: 'SIGTERM' });
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

describe('hand-off: an enqueue claims for a long-poll asleep on the same server, in its own commit', () => {
  const claimAsleep = (workerId: string, max: number, waitMs = 10_000) => sleepingClaim(t.client, t.server.url, workerId, max, waitMs);

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
    expect(jobs[0]).toMatchObject({ command: ['true'], env: {}, secretEnv: [], attempt: 1, leaseToken: expect.any(String) });
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
      listener.on('notification', (n) => { if (n.payload?.startsWith(`${queue} `)) payloads.push(n.payload); });
      await listener.query('LISTEN skipjack_jobs');
      const { answer: claim } = await claimAsleep(w.id, 2);
      const { jobs: batch } = await t.client.enqueueBatch([0, 9, 5].map((priority) => ({ command: ['true'], queue, priority })));
      expect((await claim).jobs.map((j) => j.id)).toEqual([batch[1].id, batch[2].id]);
      const alone = await t.client.enqueue({ command: ['true'], queue });
      // NOTIFYs come in commit order: once the last enqueue's is here, the batch's would be too.
      await until("the plain enqueue's NOTIFY", async () => payloads.some((p) => p.endsWith(` ${alone.id}`)) || undefined, 3000);
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
    const [w1, w2] = await Promise.all([t.client.register({ name: `${queue}-1`, queues: [queue] }), t.client.register({ name: `${queue}-2`, queues: [queue] })]);
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

  test("a NOTIFY of a job already taken wakes no other long-poll: nothing is pending by the time it comes", async () => {
    await onlyTheHandOffWakes('herd');
  });

  test("a pending job no sleeping worker can take does not make the next job's NOTIFY wake them all", async () => {
    // It waits for a worker with a GPU, which neither sleeper has; before, every NOTIFY of its queue woke both.
    const stuck = await t.client.enqueue({ command: ['true'], queue: 'stuck', constraints: { labels: { gpu: 'a100' } }, allowUnplaceable: true });
    await onlyTheHandOffWakes('stuck');
    expect((await t.client.getJob(stuck.id)).state).toBe('pending');
  });

  test("one job's hand-off statement, compiled once for its columns and given its values, is the statement compiled anew", () => {
    const jobs = [
      { command: ['true'] },
      { command: ['sh', '-c', 'x'], env: { A: '1' }, runAt: new Date(Date.now() + 60_000).toISOString(), idempotencyKey: 'k', constraints: { region: 'mad', labels: { gpu: 'a100' } }, timeoutSeconds: 5, placementDeadlineSeconds: 9 },
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
      return (await sql<{ id: number }>`INSERT INTO jobs (command, queue, priority) VALUES (ARRAY['true'], 'handoff-order', 5) RETURNING id`.execute(trx)).rows[0];
    });
    const newer = await t.client.enqueue({ command: ['true'], queue: 'handoff-order', priority: 0 });
    const { jobs } = await claim;
    expect(jobs.map((j) => j.id)).toEqual([older.id]);
    expect((await t.client.getJob(newer.id)).state).toBe('pending');
  });

  test('a batch hands over no more than the long-poll asked for, in order; the rest stays pending', async () => {
    const w = await t.client.register({ name: 'handoff-batch', queues: ['handoff-batch'] });
    const { answer: claim } = await claimAsleep(w.id, 2);
    const { jobs: batch } = await t.client.enqueueBatch([0, 9, 5].map((priority) => ({ command: ['true'], queue: 'handoff-batch', priority })));
    const { jobs } = await claim;
    expect(jobs.map((j) => j.id)).toEqual([batch[1].id, batch[2].id]);
    expect((await t.client.getJob(batch[0].id)).state).toBe('pending');
    expect(batch.map((j) => j.state)).toEqual(['pending', 'running', 'running']);
  });

  test('an idempotent repeat hands over the existing job if it is still pending', async () => {
    const w = await t.client.register({ name: 'handoff-repeat', queues: ['handoff-repeat'] });
    const first = await t.client.enqueue({ command: ['true'], queue: 'handoff-repeat', idempotencyKey: `repeat-${Date.now()}` });
    await sql`UPDATE jobs SET run_at = now() + interval '1 hour' WHERE id = ${first.id}`.execute(t.tdb.db);
    const { answer: claim } = await claimAsleep(w.id, 1);
    await sql`UPDATE jobs SET run_at = now() WHERE id = ${first.id}`.execute(t.tdb.db);
    const repeat = await t.client.enqueue({ command: ['true'], queue: 'handoff-repeat', idempotencyKey: first.idempotencyKey! });
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
  ])("a full worker's long-poll is not handed a job past its capacity (%s): the job stays pending", async (name, capacity, constraints) => {
    const queue = `handoff-full-${name}`;
    const w = await t.client.register({ name: queue, queues: [queue], capacity });
    const first = await t.client.enqueue({ command: ['true'], queue, constraints });
    expect((await t.client.claim(w.id, 1)).jobs.map((j) => j.id)).toEqual([first.id]);
    // The server does not know the worker's load: the statement's check is what keeps it.
    const { answer: claim } = await claimAsleep(w.id, 1, 300);
    const second = await t.client.enqueue({ command: ['true'], queue, constraints: { resources: { cpu: 1 } } });
    expect(second.state).toBe('pending');
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs WHERE worker_id = ${w.id} AND state = 'running'`.execute(t.tdb.db);
    expect(rows[0].n).toBe(1);
    await claim;
  });

  test('skipjack_can_start_new: an active worker with room, no lock held on it and no job of its queues due first', async () => {
    const queue = 'can-start';
    const w = await t.client.register({ name: queue, queues: [queue], capacity: { slots: 2, cpu: 4, memoryMb: 100, diskMb: 100 } });
    const can = async (cpu = 1, memoryMb = 0, diskMb = 0) =>
      (await sql<{ ok: boolean }>`SELECT skipjack_can_start_new(${w.id}, ${cpu}, ${memoryMb}, ${diskMb}) AS ok`.execute(t.tdb.db)).rows[0].ok;
    expect(await can()).toBe(true);
    expect([await can(5), await can(1, 101), await can(1, 0, 101)]).toEqual([false, false, false]);
    // A job for later does not count; a due one does, even one the worker could not run: the claim decides.
    await t.client.enqueue({ command: ['true'], queue, runAt: new Date(Date.now() + 3_600_000).toISOString() });
    expect(await can()).toBe(true);
    const big = await t.client.enqueue({ command: ['true'], queue, constraints: { resources: { cpu: 64 } }, allowUnplaceable: true });
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
  ])('no hand-off crosses a hard constraint (%s): the sleeping worker is not given the job', async (name, worker, constraints) => {
    const queue = `handoff-${name}`;
    const w = await t.client.register({ name: queue, queues: [queue], ...worker });
    const { answer: claim } = await claimAsleep(w.id, 1, 1500);
    const job = await t.client.enqueue({ command: ['true'], queue, constraints, allowUnplaceable: true });
    expect((await claim).jobs).toEqual([]);
    expect((await t.client.getJob(job.id)).state).toBe('pending');
  });

  test('a job due later is not handed off; it wakes the long-poll when due', async () => {
    const w = await t.client.register({ name: 'handoff-later', queues: ['handoff-later'] });
    const { answer: claim } = await claimAsleep(w.id, 1);
    const job = await t.client.enqueue({ command: ['true'], queue: 'handoff-later', runAt: new Date(Date.now() + 2000).toISOString() });
    expect((await t.client.getJob(job.id)).state).toBe('pending');
    const { jobs } = await claim;
    expect(jobs.map((j) => j.id)).toEqual([job.id]);
  });
});

test('a prepared statement outlives a change to the table it returns: it is prepared again', async () => {
  const pool = new pg.Pool({ connectionString: t.tdb.url, max: 1 });
  const statements = new PreparedStatements(pool);
  const query = sql<{ id: number }>`SELECT * FROM jobs WHERE id = ${-1}`.compile(t.tdb.db);
  try {
    expect(await statements.rows(query)).toEqual([]);
    // What a migration run by a newer server does under this one.
    await sql`ALTER TABLE jobs ADD COLUMN prepared_probe int`.execute(t.tdb.db);
    expect(await statements.rows(query)).toEqual([]);
    // And the server's own prepared hand-off goes on working.
    const w = await t.client.register({ name: 'handoff-altered', queues: ['handoff-altered'] });
    const { answer } = await sleepingClaim(t.client, t.server.url, w.id, 1, 10_000);
    const job = await t.client.enqueue({ command: ['true'], queue: 'handoff-altered' });
    expect((await answer).jobs.map((j) => j.id)).toEqual([job.id]);
  } finally {
    await sql`ALTER TABLE jobs DROP COLUMN IF EXISTS prepared_probe`.execute(t.tdb.db);
    await pool.end();
  }
});

test('named statements lost between calls (a pooler in transaction mode) are given up for unnamed ones, said once', async () => {
  const pool = new pg.Pool({ connectionString: t.tdb.url, max: 1 });
  const lost: string[] = [];
  const statements = new PreparedStatements(pool, (err) => lost.push(err.message));
  const query = sql<{ id: number }>`SELECT * FROM jobs WHERE id = ${-1}`.compile(t.tdb.db);
  const prepared = async () => Number((await pool.query('SELECT count(*)::int AS n FROM pg_prepared_statements')).rows[0].n);
  try {
    expect(await statements.rows(query)).toEqual([]);
    expect(await prepared()).toBe(1);
    // What a transaction-mode pooler does: the next call reaches a server connection without it.
    await pool.query('DEALLOCATE ALL');
    expect(await statements.rows(query)).toEqual([]);
    expect(await statements.rows(query)).toEqual([]);
    expect(lost).toEqual([expect.stringContaining('does not exist')]);
    expect(await prepared()).toBe(0);
  } finally {
    await pool.end();
  }
});

test('a claim that locked rows it did not take says so (NOTIFY), or claimers that skipped them would sleep', async () => {
  const w = await t.client.register({ name: 'two-queues', queues: ['left-a', 'left-b'], capacity: { slots: 10 } });
  await t.client.enqueueBatch([5, 5, 1, 1].map((priority, i) => ({ command: ['true'], priority, queue: i < 2 ? 'left-a' : 'left-b' })));
  const listener = new pg.Client({ connectionString: t.tdb.url });
  await listener.connect();
  try {
    const payloads: string[] = [];
    listener.on('notification', (n) => payloads.push(n.payload ?? ''));
    await listener.query('LISTEN skipjack_jobs');
    // Each queue's range locks up to 2 rows; the claim takes the 2 of priority 5 and leaves left-b's 2.
    const { jobs } = await t.client.claim(w.id, 2);
    expect(jobs.map((j) => j.queue)).toEqual(['left-a', 'left-a']);
    await until('the wake-up for the rows left', async () => payloads.includes('') || undefined, 3000);
  } finally {
    await listener.end();
  }
});

test('a job that was already waiting for its run time when the server started still wakes a long-poll', async () => {
  const queue = `due-${Date.now()}`;
  await sql`INSERT INTO jobs (command, queue, run_at) VALUES (ARRAY['true'], ${queue}, now() + interval '1 second')`.execute(t.tdb.db);
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
  const ws = await Promise.all(Array.from({ length: 5 }, (_, i) => t.client.register({ name: `hb${i}`, queues: [`hb${i}`] })));
  const jobs = await Promise.all(ws.map((w, i) => t.client.enqueue({ command: ['true'], queue: `hb${i}` })));
  const claims = await Promise.all(ws.map((w) => t.client.claim(w.id, 1)));
  await t.client.cancel(jobs[2].id);
  const answers = await Promise.all(ws.map((w, i) => t.client.workerHeartbeat(w.id, [
    { jobId: claims[i].jobs[0].id, leaseToken: claims[i].jobs[0].leaseToken },
    // A lease this worker does not hold: another worker's job.
    { jobId: claims[(i + 1) % 5].jobs[0].id, leaseToken: claims[(i + 1) % 5].jobs[0].leaseToken },
  ])));
  answers.forEach((a, i) => {
    expect(a.cancel).toEqual(i === 2 ? [jobs[2].id] : []);
    expect(a.lost).toEqual([claims[(i + 1) % 5].jobs[0].id]);
    expect(a.drain).toBe(false);
  });
  const unknown = await fetch(`${t.server.url}/workers/00000000-0000-4000-8000-000000000000/heartbeat`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  // A code of its own, which a worker tells from a proxy's 404 and registers again on.
  expect([unknown.status, (await unknown.json()).error]).toEqual([404, 'unknown_worker']);
});

test('a heartbeat extends leases in place (HOT updates), not by writing index entries', async () => {
  const w = await t.client.register({ name: 'hot', queues: ['hot'], capacity: { slots: 50 } });
  await t.client.enqueueBatch(Array.from({ length: 50 }, () => ({ command: ['true'], queue: 'hot' })));
  // Claimed with a lease of a minute, not this server's 1 s: the reaper must not take them meanwhile.
  const { rows: jobs } = await sql<{ id: number; lease_token: string }>`SELECT id, lease_token FROM skipjack_claim(${w.id}, 50, 60000)`.execute(t.tdb.db);
  expect(jobs).toHaveLength(50);
  const leases = jobs.map((j) => ({ jobId: Number(j.id), leaseToken: j.lease_token }));
  // One heartbeat per transaction, as the server sends them. The counters are this connection's
  // not yet reported to the statistics: read them before and after.
  const counters = async (trx: typeof t.tdb.db) => (await sql<{ upd: number; hot: number }>`
    SELECT pg_stat_get_xact_tuples_updated('jobs'::regclass)::int AS upd,
           pg_stat_get_xact_tuples_hot_updated('jobs'::regclass)::int AS hot`.execute(trx)).rows[0];
  const heartbeat = () => t.tdb.db.transaction().execute(async (trx) => {
    const before = await counters(trx);
    const [answer] = await workerHeartbeats(trx, [{ workerId: w.id, leases }], 60_000);
    expect(answer).toMatchObject({ lost: [] });
    const after = await counters(trx);
    return { updated: after.upd - before.upd, hot: after.hot - before.hot };
  });
  // An update is in place only where its page has room. The claim's new row versions took the
  // room fillfactor left, so the first heartbeats wait for PostgreSQL to prune the old versions,
  // which any older snapshot in the database (an autovacuum's ANALYZE, say) puts off. Until then
  // a heartbeat is not in place; once pruned, nearly every one is. With lease_expires_at indexed
  // (before migration 005) none ever is.
  let last = { updated: 0, hot: 0 };
  for (let round = 0; round < 60 && last.hot < 40; round++) {
    if (round > 0) await new Promise((r) => setTimeout(r, 50));
    last = await heartbeat();
    expect(last.updated).toBe(50);
  }
  expect(last.hot).toBeGreaterThanOrEqual(40);
});

test('secret env values are masked in every answer but the claim', async () => {
  const w = await t.client.register({ name: 'secret', queues: ['secret'] });
  const job = await t.client.enqueue({ command: ['true'], queue: 'secret', env: { TOKEN: 's3cr3t', MODE: 'x' }, secretEnv: ['TOKEN'] });
  expect(job.env).toEqual({ TOKEN: '***', MODE: 'x' });
  expect((await t.client.getJob(job.id)).env.TOKEN).toBe('***');
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  expect(claimed.env.TOKEN).toBe('s3cr3t');
});

test('retention deletes finished jobs past the window, with their runs and output, and nothing else', async () => {
  const old = await t.client.enqueue({ command: ['true'], queue: 'retention' });
  const recent = await t.client.enqueue({ command: ['true'], queue: 'retention' });
  const waiting = await t.client.enqueue({ command: ['true'], queue: 'retention' });
  await sql`UPDATE jobs SET state = 'succeeded', finished_at = now() - interval '2 hours' WHERE id = ${old.id}`.execute(t.tdb.db);
  await sql`UPDATE jobs SET state = 'failed', finished_at = now() - interval '10 minutes' WHERE id = ${recent.id}`.execute(t.tdb.db);
  await sql`INSERT INTO job_attempts (job_id, attempt, outcome) VALUES (${old.id}, 1, 'succeeded')`.execute(t.tdb.db);
  await sql`INSERT INTO job_logs (job_id, attempt, byte_offset, stream, data) VALUES (${old.id}, 1, 0, 'stdout', 'x')`.execute(t.tdb.db);
  expect(await deleteExpiredJobs(t.tdb.db, 3_600_000)).toBe(1);
  const left = (await sql<{ id: number }>`SELECT id FROM jobs WHERE queue = 'retention' ORDER BY id`.execute(t.tdb.db)).rows.map((r) => r.id);
  expect(left).toEqual([recent.id, waiting.id]);
  const orphans = (await sql<{ n: number }>`SELECT (SELECT count(*) FROM job_attempts WHERE job_id = ${old.id}) + (SELECT count(*) FROM job_logs WHERE job_id = ${old.id}) AS n`.execute(t.tdb.db)).rows[0];
  expect(Number(orphans.n)).toBe(0);
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
  expect(answer.releases?.map((r) => [r.jobId, r.ok])).toEqual([[a.id, true], [b.id, false]]);
  expect(answer.jobs.map((j) => j.id)).toEqual([b.id]);
  expect((await t.client.getJob(a.id)).state).toBe('succeeded');
});

test('releases carried by a claim for an unknown worker still count; the claim is a 404', async () => {
  const w = await t.client.register({ name: 'carry-404', queues: ['carry-404'], capacity: { slots: 1 } });
  const a = await t.client.enqueue({ command: ['true'], queue: 'carry-404' });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  const stranger = '00000000-0000-4000-8000-000000000000';
  const refused = await t.client.claim(stranger, 1, 0, undefined, [{ jobId: a.id, leaseToken: claimed.leaseToken, outcome: 'succeeded', exitCode: 0 }]).catch((e: ApiRequestError) => e);
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
