// One PostgreSQL for the whole run: the embedded one, or DATABASE_URL's when set. Migrations run
// once into a template; each test file then clones its own database from it (see db.ts).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createDb, migrateToLatest } from '../../server/db.js';
import { startEmbeddedPostgres } from '../../server/embedded-postgres.js';
import { freePort, withDatabase } from './ports.js';
import { installTransitionRecorder } from './state-machine.js';

/** The embedded PostgreSQL of this run, kept for the teardown (jest runs both in one process). */
export type EmbeddedHolder = { __SKIPJACK_EMBEDDED__?: { embedded: { stop(): Promise<void> }; dataDir: string } };

export const TEMPLATE_DB = `skipjack_template_${process.pid}`;

export default async function globalSetup(): Promise<void> {
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    const dataDir = mkdtempSync(join(tmpdir(), 'skipjack-test-pg-'));
    const embedded = await startEmbeddedPostgres({
      dataDir,
      port: await freePort(),
      database: 'postgres',
      dataDirMayMove: true,
    });
    (globalThis as EmbeddedHolder).__SKIPJACK_EMBEDDED__ = { embedded, dataDir: embedded.dataDir };
    adminUrl = embedded.url;
  }
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE_DB}`);
  await admin.query(`CREATE DATABASE ${TEMPLATE_DB}`);
  await admin.end();
  const templateUrl = withDatabase(adminUrl, TEMPLATE_DB);
  const { db } = createDb(templateUrl, 1);
  await migrateToLatest(db);
  await installTransitionRecorder(db);
  await db.destroy();
  process.env.SKIPJACK_TEST_ADMIN_URL = adminUrl;
  process.env.SKIPJACK_TEST_TEMPLATE_DB = TEMPLATE_DB;
}
