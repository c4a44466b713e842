// The live SQL: one file per function, trigger or view the server calls, as it stands today.
// Versioned migrations (migrations/) change tables and are frozen once released; these files are
// the current definitions, installed after them whenever their text changes (docs/sql.md).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { sql, type Kysely } from 'kysely';

/** In install order: a LANGUAGE sql function's body is checked at creation, so what it calls comes first. */
export const liveSqlFiles = [
  'region-keys.sql',
  'lease-token.sql',
  'next-state.sql',
  'worker-load.sql',
  'candidates.sql',
  'start-leases.sql',
  'claim.sql',
  'release.sql',
  'release-and-claim.sql',
  'can-start-new.sql',
  'notify-inserted.sql',
  'notify-pending-again.sql',
  'job-runs.sql',
] as const;

export function readLiveSql(file: string): string {
  return readFileSync(new URL(`./${file}`, import.meta.url), 'utf8');
}

function liveSqlChecksum(): string {
  const hash = createHash('sha256');
  for (const file of liveSqlFiles) hash.update(file).update('\0').update(readLiveSql(file)).update('\0');
  return hash.digest('hex');
}

/**
 * Installs the live SQL when its text differs from what this database last installed, or when
 * `force` (a migration just ran, and may have put back an older definition). One transaction
 * under an advisory lock, so replicas starting together install it once; CREATE OR REPLACE
 * TRIGGER locks the jobs table briefly, which is why an unchanged text installs nothing.
 */
export async function installLiveSql<DB>(db: Kysely<DB>, { force = false } = {}): Promise<boolean> {
  const checksum = liveSqlChecksum();
  return db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtext('skipjack_live_sql'))`.execute(trx);
    const installed = await sql<{ checksum: string }>`SELECT checksum FROM skipjack_live_sql`.execute(trx);
    if (!force && installed.rows[0]?.checksum === checksum) return false;
    for (const file of liveSqlFiles) await sql.raw(readLiveSql(file)).execute(trx);
    await sql`DELETE FROM skipjack_live_sql`.execute(trx);
    await sql`INSERT INTO skipjack_live_sql (checksum) VALUES (${checksum})`.execute(trx);
    return true;
  });
}
