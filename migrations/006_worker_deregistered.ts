import { sql, type Kysely } from 'kysely';

// A worker an operator deregistered stays out. 'gone' is also what the reaper calls a worker that
// fell silent, and a heartbeat brings such a worker back (a network partition heals); a worker
// deregistered with DELETE /workers/:id came back the same way at its next heartbeat, its leases
// extended again. 'deregistered' is final: its heartbeats are told to stop, and the worker stops.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE workers DROP CONSTRAINT workers_state_check,
      ADD CONSTRAINT workers_state_check CHECK (state IN ('active', 'draining', 'gone', 'deregistered'));
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    UPDATE workers SET state = 'gone' WHERE state = 'deregistered';
    ALTER TABLE workers DROP CONSTRAINT workers_state_check,
      ADD CONSTRAINT workers_state_check CHECK (state IN ('active', 'draining', 'gone'));
  `.execute(db);
}
