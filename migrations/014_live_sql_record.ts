import { sql, type Kysely } from 'kysely';

// From here on the functions, triggers and views the server calls live in server/sql/, one file
// each, installed after the migrations whenever their text changes (server/sql/index.ts). This
// table records the text last installed. Migrations stay frozen: they change tables, and drop a
// function whose signature a new definition changes.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE skipjack_live_sql (
      checksum text NOT NULL,
      installed_at timestamptz NOT NULL DEFAULT now()
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE skipjack_live_sql`.execute(db);
}
