// The worker behind a proxy that misbehaves: refusals, pages that are not the API's, answers lost on their way.
import pino from 'pino';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { until, type TestServer } from '../support/server.js';
import { finishedOn, startFixtureWorker, useWorkerFixture } from '../support/worker-fixture.js';
import { startProxy, type TestProxy } from '../support/proxy.js';

const fx = useWorkerFixture();
let t: TestServer;
beforeAll(() => {
  t = fx.t;
});
const { workers, cleanups: afterAllCleanups } = fx;
const startWorker = (queue: string, serverUrl?: string, extra?: Parameters<typeof startFixtureWorker>[3]) =>
  startFixtureWorker(fx, queue, serverUrl, extra);
const finished = finishedOn(fx);

/** The test's workers stop before the proxy they talk through. */
async function closeProxy(proxy: TestProxy) {
  await Promise.all(workers.splice(0).map((w) => w.shutdown()));
  await proxy.close();
}

/** A job whose first run fails and whose restart policy runs it again, on `queue`: the outcomes of its runs. */
async function failOnceThenSucceed(queue: string, marker: string): Promise<string[]> {
  const job = await t.client.enqueue({
    command: ['sh', '-c', 'if [ -e "$1" ]; then exit 0; fi; : >"$1"; exit 3', 'sh', marker],
    queue,
    maxAttempts: 1,
    restart: { policy: 'on-failure', maxRestarts: 3, windowSeconds: 60, delaySeconds: 0.05, backoff: 1 },
  });
  expect(await finished(job.id, 20_000)).toMatchObject({ state: 'succeeded', attempts: 1, exitCode: 0 });
  const runs = (await (await fetch(`${t.server.url}/jobs/${job.id}/attempts`)).json()).attempts;
  return runs.map((r: { outcome: string }) => r.outcome);
}

/** A 2xx that is not the API's answer: a proxy's or a gateway's own page. */
const proxyPage = { status: 200, type: 'text/html', body: '<html><body>upstream hiccup</body></html>' };

test('a worker whose heartbeat meets an older server (one that refuses waitMs) heartbeats at the interval and keeps its leases', async () => {
  // An older server, as in a rolling deploy: it refuses the field it does not know, as a strict schema does.
  const seen = { refused: 0, plain: 0 };
  const older = await startProxy(t.server.url, (url, body) => {
    if (!/^\/workers\/[^/]+\/heartbeat$/.test(url)) return undefined;
    if (!('waitMs' in body)) return void seen.plain++;
    seen.refused++;
    return {
      status: 400,
      type: 'application/json',
      body: JSON.stringify({ error: 'invalid_request', message: 'body: Unrecognized key: "waitMs"', field: 'body' }),
    };
  });
  try {
    await startWorker('older', older.url);
    // Longer than the lease TTL (3 s): it ends well only if heartbeats extend the lease.
    const job = await t.client.enqueue({ command: ['sleep', '4'], queue: 'older', maxAttempts: 1 });
    const done = await finished(job.id, 20_000);
    expect(done).toMatchObject({ state: 'succeeded', attempts: 1 });
    expect(seen.refused).toBe(1);
    expect(seen.plain).toBeGreaterThanOrEqual(2);
  } finally {
    await closeProxy(older);
  }
});

test("a proxy's refusal (a rate limit's 429, not the API's answer) of a restart or a release is retried, not taken as a lost lease", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'skipjack-proxy-refusal-'));
  afterAllCleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const refused = { restart: 0, releases: 0 };
  const limiter = await startProxy(t.server.url, (url, body) => {
    const tooMany = { status: 429, type: 'text/plain', body: 'Too Many Requests' };
    // Outcomes go up only by /releases here, whose first request is refused.
    if (url === '/claims' && Array.isArray(body.releases)) return tooMany;
    if (url === '/releases' && refused.releases++ === 0) return tooMany;
    if (url.endsWith('/restart') && refused.restart++ === 0) return tooMany;
    return undefined;
  });
  try {
    await startWorker('limited', limiter.url);
    expect(await failOnceThenSucceed('limited', join(dir, 'ran'))).toEqual(['restarted', 'succeeded']);
    expect(refused.restart).toBe(2);
    expect(refused.releases).toBeGreaterThanOrEqual(2);
  } finally {
    await closeProxy(limiter);
  }
});

test("answers to a log upload that are not the server's (a proxy's page, a body cut off) are retried: the output is stored whole", async () => {
  const garbled = [proxyPage, { status: 200, type: 'application/json', body: '{"end":' }];
  const seen = { garbled: 0, passed: 0 };
  const proxy = await startProxy(t.server.url, (url) => {
    if (!/^\/jobs\/\d+\/logs$/.test(url)) return undefined;
    const answer = garbled[seen.garbled];
    if (answer) seen.garbled++;
    else seen.passed++;
    return answer;
  });
  try {
    await startWorker('garbled', proxy.url);
    const job = await t.client.enqueue({ command: ['sh', '-c', 'echo one; echo two >&2'], queue: 'garbled' });
    expect(await finished(job.id, 20_000)).toMatchObject({ state: 'succeeded', attempts: 1 });
    expect((await t.client.logs(job.id)).split('\n').sort()).toEqual(['', 'one', 'two']);
    expect(seen).toEqual({ garbled: 2, passed: expect.any(Number) });
    expect(seen.passed).toBeGreaterThanOrEqual(1);
  } finally {
    await closeProxy(proxy);
  }
});

test("a claim carrying outcomes that is answered by a proxy's page, not the server, sends them again, not taken as refused", async () => {
  let garbled = 0;
  const proxy = await startProxy(t.server.url, (url, body) => {
    if (url !== '/claims' || !Array.isArray(body.releases) || garbled > 0) return undefined;
    garbled++;
    return proxyPage;
  });
  try {
    const warnings: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
    await startWorker('garbled-claim', proxy.url, { capacity: { slots: 2 }, log });
    const jobs = (
      await t.client.enqueueBatch(Array.from({ length: 6 }, () => ({ command: ['true'], queue: 'garbled-claim' })))
    ).jobs;
    for (const j of jobs) expect(await finished(j.id, 20_000)).toMatchObject({ state: 'succeeded', attempts: 1 });
    expect(garbled).toBe(1);
    // Not taken as an answer that refused the outcomes (the worker then forgot it had run them).
    expect(warnings.filter((w) => /release refused|dropped/.test(w))).toEqual([]);
  } finally {
    await closeProxy(proxy);
  }
});

test("a restart answered by a proxy's page, not the server, is sent again: the server records the run it ended", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'skipjack-garbled-restart-'));
  afterAllCleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  let garbled = 0;
  const proxy = await startProxy(t.server.url, (url) => {
    if (!url.endsWith('/restart') || garbled > 0) return undefined;
    garbled++;
    return proxyPage;
  });
  try {
    await startWorker('garbled-restart', proxy.url);
    expect(await failOnceThenSucceed('garbled-restart', join(dir, 'ran'))).toEqual(['restarted', 'succeeded']);
    expect(garbled).toBe(1);
  } finally {
    await closeProxy(proxy);
  }
});

test('a job that did not fit until a running one ended is claimed at once, by a long-poll the server was asked to end, not hung up on', async () => {
  const proxy = await startProxy(t.server.url);
  try {
    await startWorker('room', proxy.url, { capacity: { cpu: 1000, slots: 4 }, pollWaitMs: 20_000 });
    const first = await t.client.enqueue({
      command: ['sleep', '1'],
      queue: 'room',
      constraints: { resources: { cpu: 600 } },
    });
    await until('the first running', async () => (await t.client.getJob(first.id)).state === 'running');
    // 400 millicores left: this one waits for the first, while the worker's long-poll asks for 3 more jobs.
    const second = await t.client.enqueue({
      command: ['true'],
      queue: 'room',
      constraints: { resources: { cpu: 600 } },
    });
    // Long before the long-poll's 20 s: the worker asked again once the first had ended.
    expect(await finished(second.id, 10_000)).toMatchObject({ state: 'succeeded' });
    expect(proxy.hangUps).toEqual([]);
  } finally {
    await closeProxy(proxy);
  }
});

test('a draining worker ends its waiting long-poll by asking the server, not by hanging up on it', async () => {
  const proxy = await startProxy(t.server.url);
  try {
    const w = await startWorker('drain-poll', proxy.url, { pollWaitMs: 20_000 });
    await until('a long-poll sent', async () => proxy.requests.includes('/claims'));
    await new Promise((r) => setTimeout(r, 300)); // and asleep on the server
    await w.shutdown();
    expect(proxy.hangUps.filter((url) => url === '/claims')).toEqual([]);
  } finally {
    await closeProxy(proxy);
  }
});

test('a claim whose answer is lost on its way: the worker finds the jobs the server took for it and runs them, uncharged', async () => {
  let claims = 0;
  // The first long-poll's answer never arrives: the connection is cut once the server has answered.
  const proxy = await startProxy(t.server.url, (url) => (url === '/claims' && ++claims === 1 ? 'drop' : undefined));
  try {
    await startWorker('lost-answer', proxy.url, { pollWaitMs: 20_000 });
    await until('a long-poll sent', async () => proxy.requests.includes('/claims'));
    await new Promise((r) => setTimeout(r, 300)); // and asleep on the server, which hands it the job
    const job = await t.client.enqueue({ command: ['true'], queue: 'lost-answer', maxAttempts: 1 });
    // Without it, the job would sit under the lease until it expired, and fail as lost.
    expect(await finished(job.id)).toMatchObject({ state: 'succeeded', attempts: 1 });
    expect(proxy.faults.dropped).toBe(1);
  } finally {
    await closeProxy(proxy);
  }
});
