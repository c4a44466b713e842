// Placement against a real Postgres in pull mode: hard constraints, capacity under concurrency,
// first-fit claims, the explained "no", and deadlines.
import { sql } from 'kysely';
import { startTestServer, until, type TestServer } from '../support/server.js';
import { worker } from '../support/placement-workers.js';
import type { JobView } from '../../protocol/types.js';

async function post(t: TestServer, path: string, body: unknown) {
  const res = await fetch(t.server.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

describe('pull mode', () => {
  let t: TestServer;
  beforeEach(async () => {
    t = await startTestServer();
  });
  afterEach(async () => {
    await t.close();
  });

  test('a job for region mad never runs on an ord worker', async () => {
    const ord = await t.client.register(worker('ord-1', 'ord'));
    const mad = await t.client.register(worker('mad-1', 'mad'));
    const jobs = (
      await t.client.enqueueBatch(
        Array.from({ length: 6 }, () => ({ command: ['true'], constraints: { region: 'mad' } })),
      )
    ).jobs;
    expect((await t.client.claim(ord.id, 4)).jobs).toEqual([]);
    expect((await t.client.request<{ jobs: unknown[] }>('GET', `/jobs?available&worker=${ord.id}`)).jobs).toEqual([]);
    const claimed = (await t.client.claim(mad.id, 4)).jobs;
    expect(claimed).toHaveLength(4);
    const views = await Promise.all(claimed.map((j) => t.client.getJob(j.id)));
    expect(views.every((j) => j.state === 'running' && j.workerId === mad.id)).toBe(true);
    // Still nothing for ord, even with mad full and two mad jobs waiting.
    expect((await t.client.claim(ord.id, 4)).jobs).toEqual([]);
    const rows = (
      await sql<{ n: number }>`SELECT count(*)::int AS n FROM job_runs WHERE worker_id = ${ord.id}`.execute(t.tdb.db)
    ).rows[0];
    expect(rows.n).toBe(0);
    expect(jobs).toHaveLength(6);
  });

  test('a job for a set of regions runs in one of them; labels are matched as a selector', async () => {
    const ord = await t.client.register(worker('ord', 'ord', { labels: { gpu: 'a100' } }));
    const lis = await t.client.register(worker('lis', 'lis', { labels: { gpu: 't4' } }));
    const a = await t.client.enqueue({ command: ['true'], constraints: { region: ['mad', 'lis'] } });
    const b = await t.client.enqueue({ command: ['true'], constraints: { labels: { gpu: ['a100', 'h100'] } } });
    expect((await t.client.claim(ord.id, 4)).jobs.map((j) => j.id)).toEqual([b.id]);
    expect((await t.client.claim(lis.id, 4)).jobs.map((j) => j.id)).toEqual([a.id]);
  });

  test('capacity holds with 8 workers claiming concurrently', async () => {
    const ws = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        t.client.register(worker(`w${i}`, 'mad', { capacity: { cpu: 1000, memoryMb: 1000, diskMb: 1000, slots: 10 } })),
      ),
    );
    await t.client.enqueueBatch(
      Array.from({ length: 200 }, (_, i) => ({
        command: ['true'],
        constraints: { resources: { cpu: 100 + (i % 4) * 100, memoryMb: 150 } },
      })),
    );
    // Every worker fires several claims at once, twice over.
    for (let round = 0; round < 2; round++) {
      await Promise.all(ws.flatMap((w) => Array.from({ length: 4 }, () => t.client.claim(w.id, 10))));
    }
    const held = (
      await sql<{ worker_id: string; cpu: number; mem: number; n: number }>`
      SELECT worker_id, sum(need_cpu)::int AS cpu, sum(need_memory_mb)::int AS mem, count(*)::int AS n
      FROM jobs WHERE state = 'running' GROUP BY worker_id`.execute(t.tdb.db)
    ).rows;
    expect(held).toHaveLength(8);
    for (const h of held) {
      expect(h.cpu).toBeLessThanOrEqual(1000);
      expect(h.mem).toBeLessThanOrEqual(1000);
      expect(h.n).toBeLessThanOrEqual(10);
    }
    // Memory binds: 1000 / 150 = 6 jobs per worker at most, and the workers filled up.
    expect(held.every((h) => h.n === 6 || h.cpu + 100 > 1000)).toBe(true);
  });

  test('a claim takes jobs first-fit in claim order: one too big for what is left is passed over, a smaller one after it is not', async () => {
    const w = await t.client.register(
      worker('fit', 'mad', { capacity: { cpu: 1000, memoryMb: 8192, diskMb: 10_000, slots: 4 } }),
    );
    const cpu = (n: number, priority: number) => ({
      command: ['true'],
      priority,
      constraints: { resources: { cpu: n } },
    });
    const [a, , c] = (await t.client.enqueueBatch([cpu(600, 3), cpu(600, 2), cpu(300, 1)])).jobs;
    expect((await t.client.claim(w.id, 3)).jobs.map((j) => j.id)).toEqual([a.id, c.id]);
  });

  test('enqueue answers 422 with grouped reasons when no known worker could ever run the job', async () => {
    for (let i = 0; i < 3; i++) await t.client.register(worker(`ord-${i}`, 'ord'));
    for (let i = 0; i < 2; i++)
      await t.client.register(worker(`mad-${i}`, 'mad', { capacity: { memoryMb: 512 + i * 512, slots: 2 } }));
    const before = (await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs`.execute(t.tdb.db)).rows[0].n;
    const res = await post(t, '/jobs', {
      command: ['true'],
      constraints: { region: 'mad', resources: { memoryMb: 4096 } },
    });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe('unplaceable');
    expect(res.body.message).toBe(
      'body: no known worker could ever run this job: 0/5 workers fit: 3 region ord≠mad, 2 insufficient memory (need 4096, free ≤ 1024)',
    );
    const batch = await post(t, '/jobs', {
      jobs: [{ command: ['true'] }, { command: ['true'], constraints: { region: 'lis' } }],
    });
    expect(batch.status).toBe(422);
    expect(batch.body.unplaceable).toEqual([
      { path: 'body.jobs.1', reasons: '0/5 workers fit: 3 region ord≠lis, 2 region mad≠lis' },
    ]);
    expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM jobs`.execute(t.tdb.db)).rows[0].n).toBe(before);
    const accepted = await post(t, '/jobs', {
      command: ['true'],
      constraints: { region: 'lis' },
      allowUnplaceable: true,
    });
    expect(accepted.status).toBe(201);
    const waiting = await t.client.getJob(accepted.body.id);
    expect(waiting.waitingReason).toBe('0/5 workers fit: 3 region ord≠lis, 2 region mad≠lis');
    // The list says it too, for every pending job of the page.
    const listed = await t.client.request<{ jobs: JobView[] }>('GET', '/jobs?state=pending');
    expect(listed.jobs.find((j) => j.id === accepted.body.id)?.waitingReason).toBe(waiting.waitingReason);
  });

  test('with no worker known at all, a job is accepted and says why it waits', async () => {
    const res = await post(t, '/jobs', { command: ['true'], constraints: { region: 'mad' } });
    expect([res.status, res.body.waitingReason]).toEqual([
      201,
      'no worker is known yet: the job runs when one that fits it registers',
    ]);
    expect((await t.client.getJob(res.body.id)).waitingReason).toMatch(/^no live worker/);
  });

  test('a job for a queue no known worker serves is accepted, and its enqueue answer says why it will wait', async () => {
    await t.client.register(worker('ord', 'ord'));
    const res = await post(t, '/jobs', { jobs: [{ command: ['true'], queue: 'nobody' }, { command: ['true'] }] });
    expect(res.status).toBe(201);
    expect(res.body.jobs.map((j: { waitingReason: string | null }) => j.waitingReason)).toEqual([
      'no known worker serves queue nobody: the job runs when one that serves it and fits it registers',
      null,
    ]);
  });

  test('a job not placed by its deadline fails as unplaceable, with the reasons', async () => {
    const mad = await t.client.register(worker('mad', 'mad', { capacity: { slots: 1 } }));
    await t.client.enqueue({ command: ['sleep', '10'], constraints: { region: 'mad' } });
    expect((await t.client.claim(mad.id, 1)).jobs).toHaveLength(1);
    const late = await t.client.enqueue({
      command: ['true'],
      constraints: { region: 'mad' },
      placementDeadlineSeconds: 0.5,
    });
    const failed = await until('deadline failure', async () => {
      const j = await t.client.getJob(late.id);
      return j.state === 'failed' ? j : undefined;
    });
    expect(failed.endReason).toBe('unplaceable');
    expect(failed.error).toBe('unplaceable: not placed within 0.5s; 0/1 workers fit: 1 no free slot');
  });

  test('a placement deadline ends once the job is placed: its retries are not failed for it', async () => {
    const mad = await t.client.register(worker('mad', 'mad'));
    const job = await t.client.enqueue({
      command: ['false'],
      constraints: { region: 'mad' },
      placementDeadlineSeconds: 0.3,
      retryBackoffSeconds: 0,
    });
    const [first] = (await t.client.claim(mad.id, 1)).jobs;
    await new Promise((r) => setTimeout(r, 600));
    expect(
      (await t.client.release(job.id, { leaseToken: first.leaseToken, outcome: 'failed', exitCode: 1 })).state,
    ).toBe('pending');
    await new Promise((r) => setTimeout(r, 600)); // several reaper ticks past the original deadline
    expect(await t.client.getJob(job.id)).toMatchObject({ state: 'pending', endReason: 'exited' });
    expect((await t.client.claim(mad.id, 1)).jobs.map((j) => j.id)).toEqual([job.id]);
  });

  test("the explain endpoint shows every worker's verdict and scores", async () => {
    const busy = await t.client.register(
      worker('busy', 'mad', { capacity: { cpu: 4000, memoryMb: 8000, diskMb: 1000, slots: 4 } }),
    );
    const idle = await t.client.register(
      worker('idle', 'mad', { capacity: { cpu: 4000, memoryMb: 8000, diskMb: 1000, slots: 4 } }),
    );
    await t.client.register(worker('far', 'ord'));
    await t.client.enqueue({ command: ['true'], constraints: { resources: { cpu: 2000, memoryMb: 4000 } } });
    expect((await t.client.claim(busy.id, 1)).jobs).toHaveLength(1);
    const job = await t.client.enqueue({
      command: ['true'],
      constraints: { region: 'mad', resources: { cpu: 1000, memoryMb: 2000 } },
    });
    const explained = await t.client.placement(job.id);
    const byName = Object.fromEntries(explained.verdicts.map((v) => [v.workerName, v]));
    // least-allocated, busy: cpu (4000-3000)*100/4000 = 25, memory (8000-6000)*100/8000 = 25 → 25.
    // idle: cpu (4000-1000)*100/4000 = 75, memory (8000-2000)*100/8000 = 75 → 75. affinity: 0 (no preferences).
    // total = (1*score + 2*0) / 3.
    expect(byName.busy).toMatchObject({ fits: true, scores: { 'least-allocated': 25, affinity: 0 } });
    expect(byName.busy.total).toBeCloseTo(25 / 3);
    expect(byName.idle).toMatchObject({ fits: true, scores: { 'least-allocated': 75, affinity: 0 } });
    expect(byName.idle.total).toBeCloseTo(25);
    expect(byName.far).toMatchObject({ fits: false, filter: 'region', reason: 'region ord≠mad' });
    expect(explained.bestWorkerId).toBe(idle.id);
    expect(explained.summary).toBe('2/3 workers fit: 1 region ord≠mad');
  });
});
