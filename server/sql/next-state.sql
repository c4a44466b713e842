-- The state a run's outcome leaves its job in: docs/state-machine.md lists these transitions.
-- A cancel asked while the job ran wins over a failure; a requeue (a draining worker) is free;
-- a failure retries while attempts remain. Inlined by the planner where it is used.
CREATE OR REPLACE FUNCTION skipjack_next_state(p_outcome text, p_cancel_requested boolean, p_attempts int, p_max_attempts int)
RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
  SELECT CASE
    WHEN p_outcome = 'succeeded' THEN 'succeeded'
    WHEN p_outcome = 'cancelled' OR p_cancel_requested THEN 'cancelled'
    WHEN p_outcome = 'requeue' THEN 'pending'
    WHEN p_attempts < p_max_attempts THEN 'pending'
    ELSE 'failed' END
$fn$;
