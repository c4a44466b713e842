// Central mode with a head of jobs that fit nowhere: the job behind them that fits is placed in
// the first pass or two, and a pass reads no more rows than its budget.
import { sql } from 'kysely';
import pg from 'pg';
import type { EnqueueJob } from '../../protocol/schemas.js';
import { scheduleOnce, type ScanCursor, type ScheduleOptions } from '../../server/placement/scheduler.js';
import { loadPlacementSettings } from '../../server/placement/settings.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { startTestServer, until } from '../support/server.js';
import { worker } from '../support/placement-workers.js';

// 500 for a region no worker is in, 500 bigger than any worker: two shapes, a thousand rows.
const unfit: EnqueueJob[] = Array.from({ length: 1000 }, (_, i) => ({
  command: ['true'],
  constraints: i % 2 ? { region: 'mad' } : { resources: { memoryMb: 64_000 } },
  allowUnplaceable: true,
}));

describe('central scheduler behind jobs that fit nowhere', () => {
  let tdb: TestDatabase;
  beforeEach(async () => {
    tdb = await createTestDatabase();
  });
  afterEach(async () => {
    await tdb.drop();
  });

  test('the running server assigns the fitting job behind 1,000 unfit ones', async () => {
    const t = await startTestServer({ placementMode: 'central', workerGoneAfterMs: 60_000 }, tdb);
    try {
      const ord = await t.client.register(worker('ord', 'ord'));
      await t.client.enqueueBatch(unfit);
      const fits = await t.client.enqueue({ command: ['true'] });
      // The scheduler runs every 250 ms: 5 s is many passes, and the fix needs one (counted below).
      await until('the fitting job assigned', async () => (await t.client.getJob(fits.id)).state === 'assigned', 5000);
      expect((await t.client.getJob(fits.id)).workerId).toBe(ord.id);
    } finally {
      await t.server.close();
    }
  });

  describe('pass by pass', () => {
    // A pull-mode server runs no scheduler of its own; the test makes each pass itself.
    const setUp = async () => {
      const t = await startTestServer({ placementMode: 'pull', workerGoneAfterMs: 60_000 }, tdb);
      const ord = await t.client.register(worker('ord', 'ord'));
      await t.client.enqueueBatch(unfit);
      const fits = await t.client.enqueue({ command: ['true'] });
      return { t, ord, fits };
    };
    const settings = () => loadPlacementSettings({ mode: 'central' });
    const pass = async (options: ScheduleOptions) => {
      const s = await settings();
      return tdb.db.transaction().execute((trx) => scheduleOnce(trx, s, 60_000, options));
    };
    const stateOf = async (id: number) =>
      (await sql<{ state: string }>`SELECT state FROM jobs WHERE id = ${id}`.execute(tdb.db)).rows[0]!.state;

    test('with the default budget, the first pass assigns it', async () => {
      const { t, ord, fits } = await setUp();
      try {
        const r = await pass({});
        expect(r.assigned).toEqual([{ jobId: fits.id, workerId: ord.id }]);
        expect(r.unplaced).toHaveLength(1000);
        expect(await stateOf(fits.id)).toBe('assigned');
      } finally {
        await t.server.close();
      }
    });

    test('a row another transaction holds is skipped, not waited on, and placed by a later pass', async () => {
      const { t, ord, fits } = await setUp();
      const holder = new pg.Client({ connectionString: tdb.url });
      await holder.connect();
      try {
        // Pages are read without locks; the write must lock with SKIP LOCKED, never wait.
        await holder.query('BEGIN');
        await holder.query('SELECT id FROM jobs WHERE id = $1 FOR UPDATE', [fits.id]);
        const timeout = new Promise<'waited'>((r) => setTimeout(() => r('waited'), 3000));
        const first = await Promise.race([pass({}), timeout]);
        expect(first).not.toBe('waited');
        expect(first).toMatchObject({ assigned: [] });
        expect(await stateOf(fits.id)).toBe('pending');
        await holder.query('COMMIT');
        expect((await pass({})).assigned).toEqual([{ jobId: fits.id, workerId: ord.id }]);
      } finally {
        await holder.query('ROLLBACK').catch(() => {});
        await holder.end();
        await t.server.close();
      }
    });

    test('with a budget smaller than the backlog, passes resume where the last stopped', async () => {
      const { t, fits } = await setUp();
      try {
        const cursor: ScanCursor = {};
        const options = { batch: 100, maxScan: 300, cursor };
        let passes = 0;
        while ((await stateOf(fits.id)) !== 'assigned' && passes < 20) {
          const r = await pass(options);
          passes++;
          // Never more rows than the budget, whatever the backlog.
          expect(r.assigned.length + r.unplaced.length).toBeLessThanOrEqual(300);
        }
        // Each pass reads the 100-row head page, then 200 new rows: 1,000 rows in five passes.
        expect(passes).toBe(5);
        expect(cursor.resumeAfter).toBeUndefined();
      } finally {
        await t.server.close();
      }
    });
  });
});
