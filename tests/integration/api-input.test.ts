// The wire API's input: bad bodies are 4xx that name the field and change nothing; repeats are harmless.
import { sql } from 'kysely';
import { once } from 'node:events';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import pino from 'pino';
import { SkipjackClient } from '../../protocol/client.js';
import { startServer } from '../../server/main.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { serverHelpers } from '../support/api.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ leaseTtlMs: 1000 });
});
afterAll(async () => {
  await t.close();
});

const { post } = serverHelpers(() => t);

test('bad input is a 400 that names the field, and changes nothing', async () => {
  const count = async () =>
    Number((await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs`.execute(t.tdb.db)).rows[0].n);
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
    [
      {
        jobs: [
          { command: ['a'], idempotencyKey: 'twice' },
          { command: ['b'], idempotencyKey: 'twice' },
        ],
      },
      'body.jobs.1.idempotencyKey',
    ],
    // A lone surrogate is valid JSON, not valid text: jsonb refused these with a 500.
    ['{"command":["x"],"env":{"A":"\\ud800"}}', 'body.env.A'],
    ['{"command":["x"],"constraints":{"region":"\\ud800"}}', 'body.constraints.region'],
    ['{"command":["x"],"restart":{"\\udc00":1}}', 'body.restart.'],
    // Nesting that a recursive walk paid for with its stack (a 500).
    [`{"command":["x"],"env":{"A":${'['.repeat(20_000)}${']'.repeat(20_000)}}}`, 'body.env.A.0.0'],
  ];
  for (const [body, field] of cases) {
    const res = await post('/jobs', body);
    expect([res.status, res.body.error, res.body.message]).toEqual([
      400,
      'invalid_request',
      expect.stringContaining(field),
    ]);
  }
  const withKey = await fetch(`${t.server.url}/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': 'one-for-all' },
    body: JSON.stringify({ jobs: [{ command: ['a'] }] }),
  });
  expect([withKey.status, (await withKey.json()).message]).toEqual([
    400,
    expect.stringContaining('headers.idempotency-key'),
  ]);
  const plain = await fetch(`${t.server.url}/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'text/plain' },
    body: '{"command":["x"]}',
  });
  expect([plain.status, (await plain.json()).message]).toEqual([
    415,
    expect.stringContaining('content-type: text/plain'),
  ]);
  const broken = await post('/jobs', '{"command": [');
  expect([broken.status, broken.body.error]).toEqual([400, 'invalid_json']);
  expect(broken.body.message).toMatch(/^body: not valid JSON/);
  // Valid JSON, but no object: said so, not called invalid JSON.
  for (const [text, got] of [
    ['null', 'null'],
    ['3', 'number'],
    ['"x"', 'string'],
  ]) {
    expect(await post('/jobs', text)).toMatchObject({
      status: 400,
      body: { error: 'invalid_request', message: `body: expected a JSON object, got ${got}` },
    });
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
  const stored = async () =>
    Number(
      (await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs WHERE queue = 'cut-off'`.execute(t.tdb.db)).rows[0]
        .n,
    );
  try {
    const socket = connect(Number(new URL(other.url).port), '127.0.0.1');
    await once(socket, 'connect');
    socket.write(
      'POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"command":["true"],"queue":"cut-off"',
    );
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
  expect([stale.status, stale.body.error, stale.body.message]).toEqual([
    409,
    'run_mismatch',
    expect.stringContaining('body.run'),
  ]);
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
  const { status: code, body } = await post('/jobs', {
    jobs: Array.from({ length: 3000 }, (_, i) => ({ command: ['true'], queue: 'big-batch', env: { I: String(i) } })),
  });
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
  const viaHeader = await fetch(`${t.server.url}/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': 'hdr-1' },
    body: JSON.stringify({ command: ['true'] }),
  });
  const viaHeaderAgain = await fetch(`${t.server.url}/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': 'hdr-1' },
    body: JSON.stringify({ command: ['true'] }),
  });
  expect((await viaHeader.json()).id).toBe((await viaHeaderAgain.json()).id);
  const n = (
    await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM jobs WHERE idempotency_key IN ('deploy-42', 'hdr-1')`.execute(t.tdb.db)
  ).rows[0].n;
  expect(n).toBe(2);
});

test('an array or object bigger than any schema takes is refused before its items are looked at', async () => {
  const w = await t.client.register({ name: 'big-bodies', queues: ['big-bodies'] });
  // The last lease is bad too: a walk of every item would name it instead of the array.
  const leases = Array.from({ length: 20_000 }, () => ({
    jobId: 1,
    leaseToken: '00000000-0000-0000-0000-000000000000',
  }));
  leases.push({ jobId: 1, leaseToken: '\ud800' });
  const res = await post(`/workers/${w.id}/heartbeat`, { leases });
  expect([res.status, res.body.message]).toEqual([400, 'body.leases: must have at most 10000 items (it has 20001)']);
  const env = Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [`V${i}`, 'x']));
  const many = await post('/jobs', { command: ['true'], env });
  expect([many.status, many.body.message]).toEqual([400, 'body.env: must have at most 10000 keys (it has 10001)']);
});

test("a job's command and env together are bounded by what a program can be given", async () => {
  const before = Number((await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs`.execute(t.tdb.db)).rows[0].n);
  const env = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`BIG${i}`, 'x'.repeat(99_000)]));
  const res = await post('/jobs', { command: ['true'], env });
  expect(res.status).toBe(400);
  expect(res.body.message).toMatch(/^body\.env: command and env together must be at most 1048576 bytes/);
  const batch = await post('/jobs', { jobs: [{ command: ['true'] }, { command: ['x'.repeat(99_000)], env }] });
  expect([batch.status, batch.body.issues[0].path]).toEqual([400, 'body.jobs.1.env']);
  expect(Number((await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs`.execute(t.tdb.db)).rows[0].n)).toBe(
    before,
  );
});
