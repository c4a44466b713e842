-- A worker's finished runs, then its next claim, in one statement and one commit: the claim sees
-- the room the release made. Rows of kind 'released' answer the releases (release.sql),
-- 'claimed' ones are the claim (claim.sql); 'no_worker' says the worker is unknown (the releases
-- still count). Lock order: the worker row first, then job rows, as a heartbeat takes them; the
-- other order could deadlock with a heartbeat naming a job being released.
CREATE OR REPLACE FUNCTION skipjack_release_and_claim(p_ids bigint[], p_tokens uuid[], p_outcomes text[], p_exit_codes int[],
  p_signals text[], p_errors text[], p_reasons text[], p_worker uuid, p_max int, p_ttl_ms int)
RETURNS TABLE (kind text, id bigint, state text, released_by uuid, queue text, command text[], env jsonb,
  secret_env text[], cwd text, timeout_seconds real, kill_signal text, kill_grace_seconds real, output_cap_bytes bigint,
  restart jsonb, lease_token uuid, runs int)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
  known boolean;
BEGIN
  PERFORM 1 FROM workers w WHERE w.id = p_worker FOR NO KEY UPDATE;
  known := FOUND;
  RETURN QUERY SELECT 'released'::text, r.id, r.state, r.released_by, NULL::text, NULL::text[], NULL::jsonb, NULL::text[],
    NULL::text, NULL::real, NULL::text, NULL::real, NULL::bigint, NULL::jsonb, NULL::uuid, r.runs
    FROM skipjack_release(p_ids, p_tokens, p_outcomes, p_exit_codes, p_signals, p_errors, p_reasons) AS r;
  IF NOT known THEN
    RETURN QUERY SELECT 'no_worker'::text, NULL::bigint, NULL::text, NULL::uuid, NULL::text, NULL::text[], NULL::jsonb, NULL::text[],
      NULL::text, NULL::real, NULL::text, NULL::real, NULL::bigint, NULL::jsonb, NULL::uuid, NULL::int;
    RETURN;
  END IF;
  RETURN QUERY SELECT 'claimed'::text, c.id, 'running'::text, NULL::uuid, c.queue, c.command, c.env, c.secret_env, c.cwd, c.timeout_seconds,
    c.kill_signal, c.kill_grace_seconds, c.output_cap_bytes, c.restart, c.lease_token, c.runs
    FROM skipjack_claim(p_worker, p_max, p_ttl_ms) AS c;
END $fn$;
