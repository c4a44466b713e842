import { sql, type Kysely } from 'kysely';

// A worker proves it is itself with the key its registration returned (its sha256 is kept here):
// with a `worker` token alone, any agent could deregister any other, which is final. A worker
// registered before this has no key; only an admin token may deregister it.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE workers ADD COLUMN key_sha256 text`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE workers DROP COLUMN key_sha256`.execute(db);
}
