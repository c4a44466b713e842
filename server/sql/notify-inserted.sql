-- Wakes long-polling claimers when jobs are inserted: one NOTIFY per queue and due time per
-- statement, "queue dueMs" plus " id" when the group is one job, so a listener can arm a timer
-- for a delayed job and ask whether that job is still pending before waking anyone. A hand-off
-- to a sleeping long-poll marks its transaction (skipjack.handing_off); then only the inserted
-- jobs the hand-off left pending are announced: the others are taken already.
CREATE OR REPLACE FUNCTION skipjack_notify_inserted() RETURNS trigger LANGUAGE plpgsql AS $fn$
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
END $fn$;

CREATE OR REPLACE TRIGGER jobs_notify_insert AFTER INSERT ON jobs REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT EXECUTE FUNCTION skipjack_notify_inserted();
