// Each test file gets its own database, cloned from the migrated template, and drops it after.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createDb, type Db } from '../../server/db.js';
import { withDatabase } from './ports.js';
import { checkTransitions, FIXTURE_APPLICATION } from './state-machine.js';

export interface TestDatabase {
  url: string;
  db: Db;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = process.env.SKIPJACK_TEST_ADMIN_URL!;
  const template = process.env.SKIPJACK_TEST_TEMPLATE_DB!;
  const name = `skipjack_test_${randomBytes(6).toString('hex')}`;
  await admin(adminUrl, `CREATE DATABASE ${name} TEMPLATE ${template}`);
  const url = withDatabase(adminUrl, name);
  // The test's own writes (fixtures, a state set by hand) are not the server's: the recorder skips them.
  const { db } = createDb(url, 4, FIXTURE_APPLICATION);
  return {
    url,
    db,
    /** Drops the database, after checking that each state change it saw is in docs/state-machine.md. */
    async drop() {
      try {
        await checkTransitions(db);
      } finally {
        await db.destroy();
        await admin(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      }
    },
  };
}

async function admin(url: string, statement: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}
