// server/sql/ is the whole truth of the live SQL: a database migrated from nothing has exactly the
// functions, triggers and views its files define, each as its file says. And the region rule the
// SQL uses (region-keys.sql) is the one placement/ uses.
import { readdirSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { sql, type QueryExecutorProvider } from 'kysely';
import pg from 'pg';
import { regionFilter } from '../../placement/index.js';
import { makeJob, makeWorker } from '../../placement/fixtures.js';
import { createDb, migrateToLatest, type Db } from '../../server/db.js';
import { liveSqlFiles, readLiveSql } from '../../server/sql/index.js';
import { withDatabase } from '../support/ports.js';

const adminUrl = () => process.env.SKIPJACK_TEST_ADMIN_URL!;
async function admin(statement: string) {
  const c = new pg.Client({ connectionString: adminUrl() });
  await c.connect();
  try {
    await c.query(statement);
  } finally {
    await c.end();
  }
}

const name = `skipjack_fresh_${randomBytes(6).toString('hex')}`;
let db: Db;
beforeAll(async () => {
  await admin(`CREATE DATABASE ${name}`);
  db = createDb(withDatabase(adminUrl(), name), 2).db;
  await migrateToLatest(db);
});
afterAll(async () => {
  await db.destroy();
  await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
});

/** Every definition the server relies on, by name: skipjack functions, the jobs triggers, the views. */
async function liveDefinitions(conn: QueryExecutorProvider): Promise<Map<string, string>> {
  const { rows } = await sql<{ name: string; def: string }>`
    SELECT p.oid::regprocedure::text AS name, pg_get_functiondef(p.oid) AS def
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'public' AND p.proname LIKE 'skipjack\\_%'
    UNION ALL
    SELECT 'trigger ' || tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal
    UNION ALL
    SELECT 'view ' || viewname, definition FROM pg_views WHERE schemaname = 'public'`.execute(conn);
  return new Map(rows.map((r) => [r.name, r.def]));
}

/** The names a file defines, as liveDefinitions names them (functions by name only). */
function definedNames(text: string): string[] {
  return [...text.matchAll(/CREATE OR REPLACE (FUNCTION|TRIGGER|VIEW) (\w+)/g)].map(([, kind, n]) =>
    kind === 'FUNCTION' ? n : `${kind.toLowerCase()} ${n}`,
  );
}

test('every file in server/sql/ is installed, in the list, and defines something', () => {
  const onDisk = readdirSync(new URL('../../server/sql/', import.meta.url))
    .filter((f) => f.endsWith('.sql'))
    .sort();
  expect([...liveSqlFiles].sort()).toEqual(onDisk);
  for (const file of liveSqlFiles) expect(definedNames(readLiveSql(file))).not.toHaveLength(0);
});

test.each([...liveSqlFiles])('%s is exactly what a new database runs', async (file) => {
  const before = await liveDefinitions(db);
  // Run the file again inside a transaction that is rolled back: if what it defines is what is
  // installed, no definition changes and none is added.
  let after = new Map<string, string>();
  const undo = new Error('roll back');
  await expect(
    db.transaction().execute(async (trx) => {
      await sql.raw(readLiveSql(file)).execute(trx);
      after = await liveDefinitions(trx);
      throw undo;
    }),
  ).rejects.toBe(undo);
  expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
  for (const [n, def] of after) expect({ n, def }).toEqual({ n, def: before.get(n) });
});

test('nothing is live that no file defines', async () => {
  const defined = new Set(liveSqlFiles.flatMap((f) => definedNames(readLiveSql(f))));
  const live = [...(await liveDefinitions(db)).keys()].map((n) => n.replace(/\(.*$/, ''));
  expect(live.filter((n) => !defined.has(n))).toEqual([]);
});

test('an unchanged text installs nothing; a migration run forces a reinstall', async () => {
  const { installLiveSql } = await import('../../server/sql/index.js');
  expect(await installLiveSql(db)).toBe(false);
  expect(await installLiveSql(db, { force: true })).toBe(true);
});

test('the SQL region rule is the region filter of placement/', async () => {
  const workerRegions = [null, 'mad', 'ord', '*'];
  const jobRegions: (string | string[] | undefined)[] = [
    undefined,
    'mad',
    'ord',
    '*',
    ['mad', 'ord'],
    ['ord', 'fra'],
    ['*', 'mad'],
  ];
  const cases = workerRegions.flatMap((w) => jobRegions.map((j) => ({ w, j })));
  const inJs = cases.map(
    ({ w, j }) =>
      regionFilter.check(makeJob({ constraints: { region: j } }), makeWorker({ region: w }), { now: 0 }) === null,
  );
  // Jobs inserted as the server inserts them (regions as a list), so region_key is the table's
  // own generated column; rolled back after.
  let inSql: boolean[] = [];
  const undo = new Error('roll back');
  await expect(
    db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ fits: boolean }>`
      WITH c AS (
        SELECT x.i, x.w, CASE WHEN x.j IS NULL THEN NULL ELSE ARRAY(SELECT jsonb_array_elements_text(x.j)) END AS regions
        FROM jsonb_to_recordset(${JSON.stringify(cases.map(({ w, j }, i) => ({ i, w, j: j === undefined ? null : [j].flat() })))}::jsonb)
          AS x(i int, w text, j jsonb)
      ), job AS (
        INSERT INTO jobs (command, regions, idempotency_key) SELECT ARRAY['true'], regions, 'region-case-' || i FROM c
        RETURNING idempotency_key, region_key, regions
      )
      SELECT job.region_key = ANY (skipjack_region_keys(c.w)) AND (job.region_key <> '*' OR c.w = ANY (job.regions)) AS fits
      FROM c JOIN job ON job.idempotency_key = 'region-case-' || c.i ORDER BY c.i`.execute(trx);
      inSql = rows.map((r) => r.fits === true);
      throw undo;
    }),
  ).rejects.toBe(undo);
  expect(inSql).toEqual(inJs);
});

test('no migration imports another migration', () => {
  const dir = new URL('../../migrations/', import.meta.url);
  for (const file of readdirSync(dir).filter((f) => /^\d{3}_.*\.ts$/.test(f))) {
    const imports = [...readFileSync(new URL(file, dir), 'utf8').matchAll(/^import .* from '([^']+)'/gm)].map(
      (m) => m[1],
    );
    expect({ file, imports: imports.filter((m) => m !== 'kysely') }).toEqual({ file, imports: [] });
  }
});
