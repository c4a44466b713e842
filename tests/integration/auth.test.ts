// Bearer tokens with scopes, against a real server.
import { SkipjackClient } from '../../protocol/client.js';
import { parseTokens } from '../../server/auth.js';
import { WorkerAgent } from '../../worker/agent.js';
import { quietLog, startTestServer, type TestServer } from '../support/server.js';

const tokens = {
  admin: 'admin-token-0123456789',
  worker: 'worker-token-0123456789',
  enqueue: 'enqueue-token-0123456789',
};
let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({
    tokens: parseTokens(
      Object.entries(tokens)
        .map(([s, k]) => `${s}:${k}`)
        .join(','),
    ),
  });
});
afterAll(async () => {
  await t.close();
});

const as = (token?: string) => new SkipjackClient({ baseUrl: t.server.url, token });
const status = (p: Promise<unknown>) =>
  p.then(
    () => 200,
    (e: { status?: number }) => e.status ?? 0,
  );

test('without a token: probes answer, everything else is 401 and changes nothing', async () => {
  expect((await fetch(`${t.server.url}/healthz`)).status).toBe(200);
  expect((await fetch(`${t.server.url}/openapi.json`)).status).toBe(200);
  expect(await status(as().enqueue({ command: ['true'] }))).toBe(401);
  expect(await status(as('not-a-real-token-at-all').enqueue({ command: ['true'] }))).toBe(401);
  expect((await as(tokens.admin).listJobs()).jobs).toEqual([]);
});

test('each scope reaches its own routes and no others', async () => {
  const job = await as(tokens.enqueue).enqueue({ command: ['true'] });
  expect(await status(as(tokens.enqueue).register({ name: 'sneaky' }))).toBe(403);
  const w = await as(tokens.worker).register({ name: 'w' });
  expect(await status(as(tokens.worker).enqueue({ command: ['rm', '-rf', '/'] }))).toBe(403);
  const [claimed] = (await as(tokens.worker).claim(w.id, 1)).jobs;
  expect(claimed.id).toBe(job.id);
  expect(
    await status(as(tokens.enqueue).release(job.id, { leaseToken: claimed.leaseToken, outcome: 'succeeded' })),
  ).toBe(403);
  expect(await status(as(tokens.worker).drain(w.id))).toBe(403);
  expect(await status(as(tokens.enqueue).endPoll(w.id, w.workerKey))).toBe(403);
  await as(tokens.worker).endPoll(w.id, w.workerKey);
  const badId = await fetch(`${t.server.url}/workers/nope/end-poll`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tokens.worker}` },
  });
  expect([badId.status, (await badId.json()).message]).toEqual([400, expect.stringContaining('params.id')]);
  expect(
    (await as(tokens.worker).release(job.id, { leaseToken: claimed.leaseToken, outcome: 'succeeded', exitCode: 0 }))
      .state,
  ).toBe('succeeded');
  expect((await as(tokens.admin).drain(w.id)).state).toBe('draining');
  const refused = await fetch(`${t.server.url}/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tokens.worker}`, 'content-type': 'application/json' },
    body: '{"command":["true"]}',
  });
  expect(await refused.json()).toEqual({
    error: 'forbidden',
    message: 'this needs a token with the enqueue scope; yours has worker',
  });
});

test('bad token settings fail at start with the reason', () => {
  expect(() => parseTokens('root:abcdefghijklmnopqrstuvwxyz')).toThrow(/scope one of enqueue, worker, admin/);
  expect(() => parseTokens('admin:short')).toThrow(/shorter than 16/);
});

test('a worker token deregisters only the worker whose key it shows; an admin token any', async () => {
  const mine = await as(tokens.worker).register({ name: 'mine' });
  const other = await as(tokens.worker).register({ name: 'other' });
  expect(mine.workerKey).not.toBe(other.workerKey);
  // A worker's lease tokens are for its own key, as its deregistration is.
  const job = await as(tokens.enqueue).enqueue({ command: ['true'], queue: 'held' });
  const held = await as(tokens.worker).register({ name: 'held', queues: ['held'] });
  const [claimed] = (await as(tokens.worker).claim(held.id, 1)).jobs;
  // The lease's age is as of each answer.
  expect((await as(tokens.worker).heldJobs(held.id, held.workerKey)).jobs).toEqual([
    { ...claimed, leaseAgeMs: expect.any(Number) },
  ]);
  expect(await status(as(tokens.worker).heldJobs(held.id, mine.workerKey))).toBe(403);
  expect(await status(as(tokens.enqueue).heldJobs(held.id, held.workerKey))).toBe(403);
  expect((await as(tokens.admin).heldJobs(held.id)).jobs.map((j) => j.id)).toEqual([job.id]);
  const refused = await as(tokens.worker)
    .deregister(other.id, mine.workerKey)
    .catch((e) => e);
  expect([refused.status, refused.code, refused.message]).toEqual([
    403,
    'not_this_worker',
    expect.stringContaining('headers.x-worker-key'),
  ]);
  expect(await status(as(tokens.worker).deregister(other.id))).toBe(403);
  // Ending a worker's long-poll too: another worker's key, or none, is refused.
  expect(await status(as(tokens.worker).endPoll(other.id, mine.workerKey))).toBe(403);
  expect(await status(as(tokens.worker).endPoll(other.id))).toBe(403);
  expect(await status(as(tokens.admin).endPoll(other.id))).toBe(200);
  expect((await as(tokens.worker).workers()).workers.find((w) => w.id === other.id)?.state).toBe('active');
  expect((await as(tokens.worker).deregister(mine.id, mine.workerKey)).state).toBe('deregistered');
  expect((await as(tokens.admin).deregister(other.id)).state).toBe('deregistered');
});

test('an agent with a worker token deregisters itself when it stops', async () => {
  const agent = new WorkerAgent({
    serverUrl: t.server.url,
    token: tokens.worker,
    name: 'agent-self',
    queues: ['self'],
    log: quietLog,
    drainTimeoutMs: 1000,
  });
  await agent.start();
  await agent.shutdown();
  expect((await as(tokens.admin).request<{ state: string }>('GET', `/workers/${agent.workerId}`)).state).toBe(
    'deregistered',
  );
});
