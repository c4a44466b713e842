// Schedules against a real PostgreSQL with two server replicas: each tick makes exactly one job,
// ticks missed while no server ran become one job, and bad schedules are 400s that name the field.
import { sql } from 'kysely';
import { ApiRequestError, SkipjackClient } from '../../protocol/client.js';
import { startServer, type RunningServer } from '../../server/main.js';
import { quietLog, startTestServer, until, type TestServer } from '../support/server.js';

let t: TestServer;
let second: RunningServer;
let other: SkipjackClient;
beforeAll(async () => {
  t = await startTestServer({ schedulePollMs: 200 });
  second = await startServer({ ...t.config, port: 0 }, quietLog);
  other = new SkipjackClient({ baseUrl: second.url });
});
afterAll(async () => {
  await second.close();
  await t.close();
});

const jobsOf = async (name: string) =>
  (
    await sql<{ key: string }>`
      SELECT idempotency_key AS key FROM jobs WHERE idempotency_key LIKE ${`schedule:${name}:%`} ORDER BY id`.execute(
      t.tdb.db,
    )
  ).rows.map((r) => r.key);

test('two servers make exactly one job per tick, one tick after another', async () => {
  await t.client.saveSchedule({ name: 'every-second', cron: '* * * * * *', job: { command: ['true'], queue: 'cron' } });
  await until('five ticks', async () => (await jobsOf('every-second')).length >= 5, 15_000);
  await other.removeSchedule('every-second');
  const ticks = (await jobsOf('every-second')).map((k) => Date.parse(/\d{4}-\d\d-\d\dT[\d:.]+Z/.exec(k)![0]));
  // One job per tick, and no tick left out.
  expect(new Set(ticks).size).toBe(ticks.length);
  for (let i = 1; i < ticks.length; i++) expect(ticks[i] - ticks[i - 1]).toBe(1000);
  const { rows } = await sql<{ queue: string; command: string[] }>`
    SELECT DISTINCT queue, command FROM jobs WHERE idempotency_key LIKE 'schedule:every-second:%'`.execute(t.tdb.db);
  expect(rows).toEqual([{ queue: 'cron', command: ['true'] }]);
});

test('ticks missed while no server ran become one job, and the schedule goes on from now', async () => {
  await t.client.saveSchedule({ name: 'hourly', cron: '0 * * * *', job: { command: ['true'], queue: 'cron' } });
  // As if every server had been down for the last five hours.
  await sql`UPDATE schedules SET next_run_at = date_trunc('hour', now()) - interval '4 hours' WHERE name = 'hourly'`.execute(
    t.tdb.db,
  );
  await until('the missed ticks enqueued', async () => (await jobsOf('hourly')).length > 0);
  await new Promise((r) => setTimeout(r, 600));
  expect(await jobsOf('hourly')).toHaveLength(1);
  const [s] = (await t.client.schedules()).schedules.filter((x) => x.name === 'hourly');
  expect(Date.parse(s.nextRunAt!)).toBeGreaterThan(Date.now());
  expect(s.lastJobId).not.toBeNull();
});

test('a paused schedule makes no job; a bad one is a 400 naming its field and saves nothing', async () => {
  const held = await t.client.saveSchedule({
    name: 'held',
    cron: '* * * * * *',
    paused: true,
    job: { command: ['true'], env: { TOKEN: 's3cret', MODE: 'x' }, secretEnv: ['TOKEN'] },
  });
  expect([held.nextRunAt, held.job.env]).toEqual([null, { TOKEN: '***', MODE: 'x' }]);
  await new Promise((r) => setTimeout(r, 1500));
  expect(await jobsOf('held')).toEqual([]);
  const bad = async (body: object) =>
    t.client.saveSchedule(body as never).then(
      () => 'saved',
      (e: ApiRequestError) => [e.status, (e.body as { message: string }).message.split(':')[0]],
    );
  expect(await bad({ name: 'x', cron: 'every day', job: { command: ['true'] } })).toEqual([400, 'body.cron']);
  expect(await bad({ name: 'x', cron: '* * * * *', timeZone: 'Mars/Base', job: { command: ['true'] } })).toEqual([
    400,
    'body.timeZone',
  ]);
  expect(await bad({ name: 'x', cron: '* * * * *', job: { command: [] } })).toEqual([400, 'body.job.command']);
  expect(await bad({ name: 'x', cron: '* * * * *', job: { command: ['t'], idempotencyKey: 'k' } })).toEqual([
    400,
    'body.job.idempotencyKey',
  ]);
  expect(await bad({ name: 'Bad Name', cron: '* * * * *', job: { command: ['t'] } })).toEqual([400, 'body.name']);
  expect((await t.client.schedules()).schedules.map((s) => s.name)).toEqual(['held', 'hourly']);
  const gone = await t.client.removeSchedule('nope').catch((e: ApiRequestError) => e.status);
  expect(gone).toBe(404);
});
