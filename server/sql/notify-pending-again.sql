-- Wakes long-polling claimers when a job is pending again (a retry, a requeue, a lease the
-- reaper took back, an assignment returned). Such updates come a few at a time, so one NOTIFY
-- per row, naming its job: "queue dueMs id".
CREATE OR REPLACE FUNCTION skipjack_notify_pending_again() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM pg_notify('skipjack_jobs', NEW.queue || ' ' || floor(extract(epoch FROM NEW.run_at) * 1000)::bigint || ' ' || NEW.id);
  RETURN NULL;
END $fn$;

CREATE OR REPLACE TRIGGER jobs_notify_update AFTER UPDATE OF state ON jobs
  FOR EACH ROW WHEN (NEW.state = 'pending' AND OLD.state <> 'pending') EXECUTE FUNCTION skipjack_notify_pending_again();
