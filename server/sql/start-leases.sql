-- Starts runs (pending or assigned -> running): pending jobs the transaction path locked, or jobs
-- central mode assigned to this worker. A job assigned to another worker is not taken. The run's
-- job_attempts row is written when it ends; until then the job row is the record. Unordered:
-- sorting wide rows here cost a 250-job claim a sixth of its time; the server sorts.
-- claim.sql and the insert that starts a job (server/store) set the same columns.
CREATE OR REPLACE FUNCTION skipjack_start_leases(p_worker uuid, p_ids bigint[], p_ttl_ms int)
RETURNS SETOF jobs LANGUAGE sql SET jit = off AS $fn$
  UPDATE jobs SET state = 'running', worker_id = p_worker, lease_token = skipjack_new_lease_token(),
    lease_expires_at = now() + p_ttl_ms * interval '1 millisecond', attempts = attempts + 1, runs = runs + 1,
    started_at = now(), assigned_at = NULL, waiting_reason = NULL, placement_deadline_at = NULL,
    exit_code = NULL, signal = NULL, end_reason = NULL, error = NULL
  WHERE id = ANY (p_ids) AND (state = 'pending' OR (state = 'assigned' AND worker_id = p_worker))
  RETURNING *
$fn$;
