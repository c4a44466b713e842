import { sql, type Kysely } from 'kysely';

// A job an enqueue hands to a sleeping long-poll sends no NOTIFY. The claim in the insert's own
// statement has taken it, so nobody needs to hear of it; yet its NOTIFY woke PostgreSQL's
// listening backend and every server's LISTEN connection, on a 2-core machine at the very moment
// the claim's answer was on its way to the worker: 0.35 ms of the latency scenario's p50
// (bench/, four interleaved pairs of 200 jobs with the trigger off and on: 3.75 against 4.10 ms).
// The hand-off statement marks itself (skipjack.handing_off, for its transaction); only then does
// the trigger look at the rows it inserted again, as the statement left them, and announce those
// still pending. A plain enqueue, a bulk one included, does as before.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION skipjack_notify_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      handing_off boolean := current_setting('skipjack.handing_off', true) = 'on';
    BEGIN
      PERFORM pg_notify('skipjack_jobs', g.queue || ' ' || g.due_ms || CASE WHEN g.n = 1 THEN ' ' || g.id ELSE '' END)
      FROM (SELECT i.queue, floor(extract(epoch FROM i.run_at) * 1000)::bigint AS due_ms, count(*) AS n, min(i.id) AS id
            FROM inserted i
            WHERE i.state = 'pending'
              AND (handing_off IS NOT TRUE OR EXISTS (SELECT 1 FROM jobs j WHERE j.id = i.id AND j.state = 'pending'))
            GROUP BY 1, 2) AS g;
      RETURN NULL;
    END $$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await notifyInsertedFunction.execute(db);
}

/** The insert trigger's function as 007 made it, frozen here for the down. */
const notifyInsertedFunction = sql`
    CREATE OR REPLACE FUNCTION skipjack_notify_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('skipjack_jobs', g.queue || ' ' || g.due_ms || CASE WHEN g.n = 1 THEN ' ' || g.id ELSE '' END)
      FROM (SELECT queue, floor(extract(epoch FROM run_at) * 1000)::bigint AS due_ms, count(*) AS n, min(id) AS id
            FROM inserted WHERE state = 'pending' GROUP BY 1, 2) AS g;
      RETURN NULL;
    END $$;`;
