// A job's output end to end: byte-exact binary logs, the output cap, chunks sent twice, and
// output produced while the server is away. A real server and Postgres, real worker agents.
import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { startServer } from '../../server/main.js';
import { readLogPage } from '../../server/store/leases.js';
import { quietLog, until, type TestServer } from '../support/server.js';
import { finishedOn, startFixtureWorker, useWorkerFixture } from '../support/worker-fixture.js';

const fx = useWorkerFixture();
let t: TestServer;
beforeAll(() => {
  t = fx.t;
});
const startWorker = (queue: string, serverUrl?: string, extra?: Parameters<typeof startFixtureWorker>[3]) =>
  startFixtureWorker(fx, queue, serverUrl, { pollWaitMs: 1000, ...extra });
const finished = finishedOn(fx);

const pattern = (bytes: number) => {
  const b = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) b[i] = (i * 7 + 3) & 255; // every byte value, not UTF-8
  return b;
};
const writer = (mib: number) =>
  `const b=Buffer.alloc(1<<20);for(let i=0;i<b.length;i++)b[i]=(i*7+3)&255;for(let k=0;k<${mib};k++)process.stdout.write(b)`;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function rawLogs(id: number): Promise<Buffer> {
  return Buffer.from(await (await fetch(`${t.server.url}/jobs/${id}/logs`)).arrayBuffer());
}

test('a 20 MB binary log arrives byte-exact', async () => {
  await startWorker('big');
  const job = await t.client.enqueue({ command: [process.execPath, '-e', writer(20)], queue: 'big' });
  expect((await finished(job.id, 60_000)).state).toBe('succeeded');
  const got = await rawLogs(job.id);
  expect(got.length).toBe(20 * 2 ** 20);
  expect(sha(got)).toBe(sha(Buffer.concat(Array.from({ length: 20 }, () => pattern(2 ** 20)))));
}, 90_000);

test('output past the cap is cut there with a marker, and the job runs to its end', async () => {
  await startWorker('cap');
  const cap = 1_000_000;
  const job = await t.client.enqueue({
    command: ['sh', '-c', `${JSON.stringify(process.execPath)} -e '${writer(3)}'; exit 4`],
    queue: 'cap',
    outputCapBytes: cap,
    maxAttempts: 1,
  });
  expect(await finished(job.id, 30_000)).toMatchObject({ state: 'failed', exitCode: 4 });
  const got = await rawLogs(job.id);
  const marker = `\n[skipjack] output truncated at ${cap} bytes; the job kept running\n`;
  expect(got.subarray(0, cap).equals(pattern(2 ** 20).subarray(0, cap))).toBe(true);
  expect(got.subarray(cap).toString()).toBe(marker);
});

test('a chunk sent again is stored once; one past the end is refused as a gap', async () => {
  const w = await t.client.register({ name: 'raw', queues: ['chunks'] });
  const job = await t.client.enqueue({ command: ['true'], queue: 'chunks' });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  const chunk = (offset: number, text: string) => ({
    offset,
    stream: 'stdout' as const,
    data: Buffer.from(text).toString('base64'),
  });
  await t.client.appendLogs(job.id, claimed.leaseToken, [chunk(0, 'hello ')]);
  // The retry of a request whose answer was lost, and one overlapping it.
  await t.client.appendLogs(job.id, claimed.leaseToken, [chunk(0, 'hello ')]);
  expect(await t.client.appendLogs(job.id, claimed.leaseToken, [chunk(3, 'lo world')])).toEqual({ end: 11, stored: 5 });
  const gap = await t.client.appendLogs(job.id, claimed.leaseToken, [chunk(20, 'x')]).catch((e) => e);
  expect(gap.status).toBe(409);
  expect(gap.body).toMatchObject({ error: 'log_gap', expectedOffset: 11 });
  expect(await t.client.logs(job.id)).toBe('hello world');
});

test('output produced while the server is down is delivered after it returns, exactly once', async () => {
  // A lease that outlives the outage: the worker heartbeats every third of it.
  const first = await startServer({ ...t.config, port: 0, leaseTtlMs: 6000 }, quietLog);
  await startWorker('outage', first.url, { pollWaitMs: 500 });
  const job = await t.client.enqueue({
    command: ['sh', '-c', 'for i in $(seq 1 20); do echo line $i; sleep 0.1; done'],
    queue: 'outage',
  });
  await until('some output', async () => (await t.client.logs(job.id)).includes('line 3'));
  await first.close();
  await new Promise((r) => setTimeout(r, 700));
  const second = await startServer({ ...t.config, port: first.port, leaseTtlMs: 6000 }, quietLog);
  try {
    expect(await finished(job.id)).toMatchObject({ state: 'succeeded', attempts: 1, error: null });
    const expected = Array.from({ length: 20 }, (_, i) => `line ${i + 1}\n`).join('');
    expect(await t.client.logs(job.id)).toBe(expected);
  } finally {
    await Promise.all(fx.workers.splice(0).map((a) => a.shutdown()));
    await second.close();
  }
});

test("a lost run's output ends with a line saying it was lost, and why, in the whole view and when followed", async () => {
  const w = await t.client.register({ name: 'raw-lost', queues: ['lost-output'] });
  const job = await t.client.enqueue({ command: ['true'], queue: 'lost-output', maxAttempts: 2 });
  const chunk = (text: string) => [
    { offset: 0, stream: 'stdout' as const, data: Buffer.from(text).toString('base64') },
  ];
  const [first] = (await t.client.claim(w.id, 1)).jobs;
  await t.client.appendLogs(job.id, first.leaseToken, chunk('first try\n'));
  // Its worker goes silent: the reaper takes the lease back and records the run as lost.
  await sql`UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = ${job.id}`.execute(t.tdb.db);
  await until('the run lost', async () => (await t.client.getJob(job.id)).state === 'pending');
  const lost = '--- run 1 was lost: lease expired: the worker stopped heartbeating; its output stops here ---\n';
  expect(await t.client.logs(job.id)).toBe(`first try\n${lost}`);
  const [second] = (await t.client.claim(w.id, 1)).jobs;
  await t.client.appendLogs(job.id, second.leaseToken, chunk('second try\n'));
  await t.client.release(job.id, { leaseToken: second.leaseToken, outcome: 'succeeded', exitCode: 0 });
  const whole = `--- run 1 ---\nfirst try\n${lost}--- run 2 ---\nsecond try\n`;
  expect(await t.client.logs(job.id)).toBe(whole);
  const followed = await fetch(`${t.server.url}/jobs/${job.id}/logs?follow=1`).then((r) => r.text());
  expect(followed).toBe(`first try\n${lost}--- run 2 ---\nsecond try\n`);
});

test('the server keeps no output past the cap (and room for the marker), whatever a worker sends', async () => {
  const w = await t.client.register({ name: 'raw-cap', queues: ['server-cap'] });
  const job = await t.client.enqueue({ command: ['true'], queue: 'server-cap', outputCapBytes: 1024 });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  const chunk = (offset: number, bytes: number) => [
    { offset, stream: 'stdout' as const, data: Buffer.alloc(bytes, 'x').toString('base64') },
  ];
  expect(await t.client.appendLogs(job.id, claimed.leaseToken, chunk(0, 10_000))).toEqual({
    end: 10_000,
    stored: 2048,
  });
  // Past the limit nothing is missing: the next chunk is taken (and dropped), not a gap.
  expect(await t.client.appendLogs(job.id, claimed.leaseToken, chunk(10_000, 10_000))).toEqual({
    end: 20_000,
    stored: 0,
  });
  expect((await rawLogs(job.id)).length).toBe(2048);
});

test('output is read a page at a time: whole chunks up to about a MiB, at least one', async () => {
  const job = await t.client.enqueue({ command: ['true'], queue: 'pages' });
  const chunk = 600 * 1024;
  await sql`
    INSERT INTO job_logs (job_id, attempt, byte_offset, stream, data)
    SELECT ${job.id}, 1, g * ${chunk}, 'stdout', convert_to(repeat('y', ${chunk}), 'UTF8') FROM generate_series(0, 3) g`.execute(
    t.tdb.db,
  );
  const offsets = async (from: { run: number; offset: number }, maxBytes?: number) =>
    (await readLogPage(t.tdb.db, job.id, from, { maxBytes })).map((c) => c.byte_offset);
  expect(await offsets({ run: 0, offset: 0 })).toEqual([0, chunk]);
  expect(await offsets({ run: 1, offset: 2 * chunk })).toEqual([2 * chunk, 3 * chunk]);
  expect(await offsets({ run: 1, offset: 0 }, 1)).toEqual([0]);
  // Read whole, through the pages, it is every byte in order.
  expect((await rawLogs(job.id)).equals(Buffer.alloc(4 * chunk, 'y'))).toBe(true);
});
