import { sql, type Kysely } from 'kysely';

// A job NOTIFY names its job when it stands for one. A server with long-polls asleep asks, before
// waking them, whether the NOTIFY's job is still pending; it asked whether any job of the queue
// was, and one pending job that no sleeping worker can take (waiting for a worker with a label,
// say) made every enqueue in its queue wake all of them, each for a claim that found nothing.
// - An insert notifies once per queue and due time, as before, from one statement-level trigger
//   (a row trigger with the id in the payload would send one NOTIFY per row of a bulk insert);
//   the payload names the job when the group holds one: "queue dueMs id".
// - A job back to pending (a retry, a requeue) names its job: such updates come a few at a time.

/** The insert trigger's function as this migration made it (012 changes it; its down puts a frozen copy back). */
const notifyInsertedFunction = sql`
    CREATE OR REPLACE FUNCTION skipjack_notify_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('skipjack_jobs', g.queue || ' ' || g.due_ms || CASE WHEN g.n = 1 THEN ' ' || g.id ELSE '' END)
      FROM (SELECT queue, floor(extract(epoch FROM run_at) * 1000)::bigint AS due_ms, count(*) AS n, min(id) AS id
            FROM inserted WHERE state = 'pending' GROUP BY 1, 2) AS g;
      RETURN NULL;
    END $$;`;

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER jobs_notify_insert ON jobs;
    DROP TRIGGER jobs_notify_update ON jobs;
    DROP FUNCTION skipjack_notify_pending();

    ${notifyInsertedFunction}
    CREATE TRIGGER jobs_notify_insert AFTER INSERT ON jobs REFERENCING NEW TABLE AS inserted
      FOR EACH STATEMENT EXECUTE FUNCTION skipjack_notify_inserted();

    CREATE FUNCTION skipjack_notify_pending_again() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('skipjack_jobs', NEW.queue || ' ' || floor(extract(epoch FROM NEW.run_at) * 1000)::bigint || ' ' || NEW.id);
      RETURN NULL;
    END $$;
    CREATE TRIGGER jobs_notify_update AFTER UPDATE OF state ON jobs
      FOR EACH ROW WHEN (NEW.state = 'pending' AND OLD.state <> 'pending') EXECUTE FUNCTION skipjack_notify_pending_again();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER jobs_notify_insert ON jobs;
    DROP TRIGGER jobs_notify_update ON jobs;
    DROP FUNCTION skipjack_notify_inserted();
    DROP FUNCTION skipjack_notify_pending_again();
    ${notifyTriggers}
  `.execute(db);
}

/** The triggers as 001 made them, frozen here for the down. */
const notifyTriggers = sql`
    CREATE FUNCTION skipjack_notify_pending() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('skipjack_jobs', NEW.queue || ' ' || floor(extract(epoch FROM NEW.run_at) * 1000)::bigint::text);
      RETURN NULL;
    END $$;
    CREATE TRIGGER jobs_notify_insert AFTER INSERT ON jobs
      FOR EACH ROW WHEN (NEW.state = 'pending') EXECUTE FUNCTION skipjack_notify_pending();
    CREATE TRIGGER jobs_notify_update AFTER UPDATE OF state ON jobs
      FOR EACH ROW WHEN (NEW.state = 'pending' AND OLD.state <> 'pending') EXECUTE FUNCTION skipjack_notify_pending();`;
