-- Ends runs, many in one statement (running -> succeeded | failed | cancelled | pending): each
-- row's next state is next-state.sql's, from the row it updates. Fenced by the lease token: a
-- token is set only while the job runs (a CHECK), so the token match is also the state test, and
-- a stale token matches nothing and changes nothing. The run that ends its job is kept in the
-- job's row alone (last_worker_id and its outcome columns); a run whose job goes on (a retry, a
-- requeue) or whose outcome is not the job's end (a failure after a cancel was asked) is also
-- written to job_attempts. One UPDATE without a SELECT ... FOR UPDATE first: locking a row
-- writes it too. A function for its settings: a planner without statistics joined the batch to
-- every job by sequential scan.
CREATE OR REPLACE FUNCTION skipjack_release(p_ids bigint[], p_tokens uuid[], p_outcomes text[], p_exit_codes int[],
  p_signals text[], p_errors text[], p_reasons text[])
RETURNS TABLE (id bigint, state text, runs int, released_by uuid)
LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH released AS (
    UPDATE jobs j SET
      state = skipjack_next_state(i.outcome, j.cancel_requested, j.attempts, j.max_attempts),
      attempts = CASE WHEN i.outcome = 'requeue' THEN j.attempts - 1 ELSE j.attempts END,
      run_at = CASE WHEN i.outcome = 'failed' AND skipjack_next_state(i.outcome, j.cancel_requested, j.attempts, j.max_attempts) = 'pending'
                    -- the backoff doubles per attempt, capped at an hour; jitter takes 0-50% off it
                    THEN now() + least(j.retry_backoff_seconds * power(2, greatest(j.attempts - 1, 0)), 3600) * (1 - random() / 2) * interval '1 second'
                    ELSE j.run_at END,
      worker_id = NULL, lease_token = NULL, lease_expires_at = NULL, last_worker_id = j.worker_id,
      exit_code = i.exit_code, signal = i.signal, error = i.error, end_reason = i.reason,
      finished_at = CASE WHEN skipjack_next_state(i.outcome, j.cancel_requested, j.attempts, j.max_attempts) = 'pending' THEN NULL ELSE now() END
    FROM unnest(p_ids, p_tokens, p_outcomes, p_exit_codes, p_signals, p_errors, p_reasons) AS i(id, token, outcome, exit_code, signal, error, reason)
    WHERE j.id = i.id AND j.lease_token = i.token
    RETURNING j.id, j.state, j.runs, j.last_worker_id, j.started_at, i.outcome, i.exit_code, i.signal, i.error, i.reason
  ), recorded AS (
    INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, ended_at, outcome, exit_code, signal, error, end_reason)
    SELECT r.id, r.runs, r.last_worker_id, r.started_at, now(), r.outcome, r.exit_code, r.signal, r.error, r.reason FROM released r
    WHERE r.outcome IS DISTINCT FROM r.state
  )
  SELECT r.id, r.state, r.runs, r.last_worker_id FROM released r;
END $fn$;
