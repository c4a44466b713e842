import { sql, type Kysely } from 'kysely';

// A drain asked of a worker outlasts its silence: the reaper marks a silent worker gone, and its
// next heartbeat brings it back as it was, draining if a drain was asked. Before, it came back
// active and claimed again. A drain is never taken back, so a flag is enough.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE workers ADD COLUMN drain_asked boolean NOT NULL DEFAULT false;
    UPDATE workers SET drain_asked = true WHERE state = 'draining';
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE workers DROP COLUMN drain_asked`.execute(db);
}
