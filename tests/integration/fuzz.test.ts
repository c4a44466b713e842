// Property test over every route: whatever the path, query, headers and body, the server answers
// below 500, and a request it refuses (4xx) changes no row. FUZZ_RUNS sets the number of cases
// (the default keeps npm test quick; FUZZ_RUNS=10000 for a full run), FUZZ_SEED replays one.
import fc from 'fast-check';
import { sql } from 'kysely';
import { startTestServer, type TestServer } from '../support/server.js';

let t: TestServer;
let ids: { job: number; pending: number; worker: string; key: string; lease: string };
beforeAll(async () => {
  // Long leases and silence windows: nothing changes in the background while a case runs.
  t = await startTestServer({ leaseTtlMs: 600_000, schedulePollMs: 600_000 });
  const w = await t.client.register({ name: 'fuzz', queues: ['fuzz'] });
  const job = await t.client.enqueue({ command: ['true'], queue: 'fuzz' });
  const [claimed] = (await t.client.claim(w.id, 1)).jobs;
  const pending = await t.client.enqueue({ command: ['true'], queue: 'other' });
  ids = { job: job.id, pending: pending.id, worker: w.id, key: w.workerKey, lease: claimed.leaseToken };
});
afterAll(async () => {
  await t.close();
});

const routes: [method: string, path: string][] = [
  ['POST', '/jobs'],
  ['GET', '/jobs'],
  ['GET', '/jobs/:job'],
  ['GET', '/jobs/:job/attempts'],
  ['GET', '/jobs/:job/placement'],
  ['GET', '/jobs/:job/logs'],
  ['POST', '/jobs/:job/cancel'],
  ['POST', '/jobs/:job/claim'],
  ['POST', '/jobs/:job/heartbeat'],
  ['POST', '/jobs/:job/logs'],
  ['POST', '/jobs/:job/release'],
  ['POST', '/jobs/:job/restart'],
  ['POST', '/releases'],
  ['POST', '/claims'],
  ['GET', '/workers'],
  ['POST', '/workers'],
  ['GET', '/workers/:worker'],
  ['POST', '/workers/:worker/heartbeat'],
  ['POST', '/workers/:worker/drain'],
  ['POST', '/workers/:worker/end-poll'],
  ['GET', '/workers/:worker/leases'],
  ['DELETE', '/workers/:worker'],
  ['GET', '/schedules'],
  ['POST', '/schedules'],
  ['DELETE', '/schedules/:name'],
];

/** Every row the API can change, as one digest. */
async function digest(): Promise<string> {
  const { rows } = await sql<{ d: string }>`
    SELECT md5(concat_ws('|',
      (SELECT string_agg(to_jsonb(j)::text, ',' ORDER BY id) FROM jobs j),
      (SELECT string_agg(to_jsonb(w)::text, ',' ORDER BY id) FROM workers w),
      (SELECT string_agg(to_jsonb(a)::text, ',' ORDER BY job_id, attempt) FROM job_attempts a),
      (SELECT string_agg(job_id || ':' || attempt || ':' || byte_offset, ',' ORDER BY 1) FROM job_logs),
      (SELECT string_agg(to_jsonb(s)::text, ',' ORDER BY name) FROM schedules s))) AS d`.execute(t.tdb.db);
  return rows[0].d;
}

const idLike = () =>
  fc.oneof(
    fc.constant('VALID'),
    fc.integer({ min: -5, max: 2 ** 53 }).map(String),
    fc.string({ maxLength: 20 }).map(encodeURIComponent),
    fc.constantFrom('0', '1e3', '0x10', '00000000-0000-0000-0000-000000000000', '%00', '..'),
  );
const valueLike = () =>
  fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.constantFrom('VALID_LEASE', 'VALID_WORKER', 'VALID_JOB', -1, 2 ** 31, 1e308, '', '\u0000', '\ud800'),
  );
const bodyLike = () =>
  fc.oneof(
    fc.dictionary(
      fc.constantFrom(
        'command',
        'jobs',
        'workerId',
        'leaseToken',
        'max',
        'waitMs',
        'leases',
        'chunks',
        'outcome',
        'exitCode',
        'name',
        'queues',
        'capacity',
        'cron',
        'job',
        'releases',
        '__proto__',
      ),
      valueLike(),
      { maxKeys: 5 },
    ),
    fc.jsonValue({ maxDepth: 4 }),
    fc.string({ maxLength: 50 }),
  );
const contentType = fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', undefined);
const query = fc.dictionary(
  fc.constantFrom('state', 'queue', 'cursor', 'limit', 'attempt', 'follow', 'available', 'worker', 'x'),
  fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom('1', '-1', 'pending', 'VALID_WORKER')),
  { maxKeys: 3 },
);

function fill(text: string): string {
  return text
    .replaceAll('VALID_LEASE', ids.lease)
    .replaceAll('VALID_WORKER', ids.worker)
    .replaceAll('VALID_JOB', String(ids.job));
}

test('no route answers 5xx to any input, and a refused request changes nothing', async () => {
  const runs = Number(process.env.FUZZ_RUNS ?? 300);
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...routes),
      idLike(),
      query,
      bodyLike(),
      contentType,
      fc.boolean(),
      async ([method, template], id, q, body, type, withKey) => {
        const path = template
          .replace(':job', id === 'VALID' ? String(ids.job) : id)
          .replace(':worker', id === 'VALID' ? ids.worker : id)
          .replace(':name', id === 'VALID' ? 'nightly' : id);
        const search = new URLSearchParams(Object.entries(q).map(([k, v]) => [k, fill(v)])).toString();
        const headers: Record<string, string> = {};
        if (type) headers['content-type'] = type;
        if (withKey) headers['x-worker-key'] = ids.key;
        const before = await digest();
        let status: number;
        try {
          const res = await fetch(`${t.server.url}${path}${search ? `?${search}` : ''}`, {
            method,
            headers,
            body: method === 'GET' ? undefined : fill(typeof body === 'string' ? body : JSON.stringify(body)),
            signal: AbortSignal.timeout(1500), // a long-poll or a followed log may rightly hold on
          });
          status = res.status;
          await res.arrayBuffer().catch(() => undefined);
        } catch (err) {
          if ((err as Error).name === 'TimeoutError') return;
          throw err;
        }
        expect(status).toBeLessThan(500);
        if (status >= 400) expect(await digest()).toBe(before);
      },
    ),
    { numRuns: runs, seed: process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined, endOnFailure: true },
  );
}, 600_000);
