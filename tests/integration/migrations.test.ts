// Undoing a migration keeps what the data says: migration 008 keeps a job's final run in the job's
// row alone, and undoing it writes those runs back out to job_attempts.
import { Migrator, sql } from 'kysely';
import { migrations } from '../../migrations/index.js';
import { startTestServer, type TestServer } from '../support/server.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

const runsOf = async (table: 'job_runs' | 'job_attempts', jobIds: number[]) =>
  (
    await sql<{
      job_id: number;
      attempt: number;
      worker_id: string;
      outcome: string;
      exit_code: number | null;
      ended_at: Date | null;
    }>`
    SELECT job_id::int, attempt, worker_id, outcome, exit_code, ended_at FROM ${sql.table(table)}
    WHERE job_id = ANY(${jobIds}::bigint[]) ORDER BY job_id, attempt`.execute(t.tdb.db)
  ).rows;

test('undoing 008 writes the final runs kept in job rows to job_attempts, and redoing it lists the same runs', async () => {
  const w = await t.client.register({ name: 'm', queues: ['m'] });
  const ok = await t.client.enqueue({ command: ['true'], queue: 'm' });
  const retried = await t.client.enqueue({ command: ['false'], queue: 'm', maxAttempts: 2, retryBackoffSeconds: 0 });
  const claimed = (await t.client.claim(w.id, 2)).jobs;
  const token = (id: number) => claimed.find((j) => j.id === id)!.leaseToken;
  await t.client.release(ok.id, { leaseToken: token(ok.id), outcome: 'succeeded', exitCode: 0 });
  await t.client.release(retried.id, { leaseToken: token(retried.id), outcome: 'failed', exitCode: 1 });
  const [again] = (await t.client.claim(w.id, 1, 5000)).jobs;
  expect(again.id).toBe(retried.id);
  await t.client.release(retried.id, { leaseToken: again.leaseToken, outcome: 'failed', exitCode: 2 });
  const running = await t.client.enqueue({ command: ['sleep', '9'], queue: 'm' });
  expect((await t.client.claim(w.id, 1)).jobs.map((j) => j.id)).toEqual([running.id]);
  const ids = [ok.id, retried.id, running.id];

  const before = await runsOf('job_runs', ids);
  expect(before.map((r) => [r.job_id, r.attempt, r.outcome, r.exit_code, r.worker_id])).toEqual([
    [ok.id, 1, 'succeeded', 0, w.id],
    [retried.id, 1, 'failed', 1, w.id],
    [retried.id, 2, 'failed', 2, w.id],
    [running.id, 1, null, null, w.id],
  ]);
  expect((await runsOf('job_attempts', ids)).map((r) => [r.job_id, r.attempt])).toEqual([[retried.id, 1]]);

  const migrator = new Migrator({ db: t.tdb.db, provider: { getMigrations: async () => migrations } });
  const down = await migrator.migrateTo('007_notify_job_ids');
  expect(down.error).toBeUndefined();
  // Every ended run is in job_attempts again, as the release before 008 wrote them.
  expect(await runsOf('job_attempts', ids)).toEqual(before.filter((r) => r.outcome !== null));

  const up = await migrator.migrateToLatest();
  expect(up.error).toBeUndefined();
  expect(await runsOf('job_runs', ids)).toEqual(before);
});
