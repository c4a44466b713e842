import { sql, type Kysely } from 'kysely';

// Schedules: a cron expression in a time zone and the job each tick enqueues. next_run_at is the
// next tick still to enqueue; the job of a tick carries the idempotency key "schedule:NAME:TICK",
// so that a tick makes one job however many servers see it.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE schedules (
      name text PRIMARY KEY,
      cron text NOT NULL,
      time_zone text NOT NULL DEFAULT 'UTC',
      job jsonb NOT NULL,
      paused boolean NOT NULL DEFAULT false,
      next_run_at timestamptz,
      last_run_at timestamptz,
      last_job_id bigint,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX schedules_due_idx ON schedules (next_run_at) WHERE NOT paused;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE schedules`.execute(db);
}
