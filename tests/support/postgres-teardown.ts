import { rmSync } from 'node:fs';
import pg from 'pg';
import type { EmbeddedHolder } from './postgres-setup.js';

export default async function globalTeardown(): Promise<void> {
  const adminUrl = process.env.SKIPJACK_TEST_ADMIN_URL;
  const template = process.env.SKIPJACK_TEST_TEMPLATE_DB;
  if (adminUrl && template) {
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
  const state = (globalThis as EmbeddedHolder).__SKIPJACK_EMBEDDED__;
  if (state) {
    await state.embedded.stop();
    rmSync(state.dataDir, { recursive: true, force: true });
  }
}
