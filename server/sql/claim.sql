-- A pull claim in one statement (pending -> running), for queues whose filters all run in SQL
-- (the built-ins): the worker's queues, region (region-keys.sql), labels and free capacity,
-- first fit in claim order, FOR UPDATE SKIP LOCKED. Static and inline: plpgsql keeps the plans
-- of static statements, where EXECUTE plans every call. It answers with the columns a worker
-- needs to run a job, in claim order.
-- Settings: never a sequential scan (on a small table in memory the planner rates reading every
-- job cheaper than 250 lookups, and is wrong by 4 ms a claim); generic plans (value plans are
-- never cheaper here); no JIT (a generic plan at 1,000,000 pending is costed above
-- jit_above_cost, and compiling it took 200 ms of every claim); no bitmap scan (it would gather
-- every claimable job to sort them; a test checks the rows read with a shuffled backlog).
CREATE OR REPLACE FUNCTION skipjack_claim(p_worker uuid, p_max int, p_ttl_ms int)
RETURNS TABLE (id bigint, queue text, command text[], env jsonb, secret_env text[], cwd text,
  timeout_seconds real, kill_signal text, kill_grace_seconds real, output_cap_bytes bigint, restart jsonb,
  lease_token uuid, runs int)
LANGUAGE plpgsql
SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off SET enable_bitmapscan = off AS $fn$
#variable_conflict use_column
DECLARE
  w workers;
  c record;
  free_cpu int; free_memory_mb int; free_disk_mb int; free_slots int;
  tids tid[] := '{}';
  seen int := 0;
BEGIN
  -- The row lock serializes one worker's claims, so two cannot both spend its free capacity.
  SELECT * INTO w FROM workers WHERE id = p_worker FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'worker % not found', p_worker USING ERRCODE = 'no_data_found';
  END IF;
  IF w.state <> 'active' THEN RETURN; END IF;
  -- A statement after the lock: its snapshot holds every claim committed before ours.
  SELECT w.cpu - l.cpu, w.memory_mb - l.memory_mb, w.disk_mb - l.disk_mb, least(p_max, w.slots - l.slots)
    INTO free_cpu, free_memory_mb, free_disk_mb, free_slots FROM skipjack_worker_load(w.id) AS l;
  IF free_slots <= 0 THEN RETURN; END IF;
  FOR c IN
    SELECT x.tid, x.need_cpu, x.need_memory_mb, x.need_disk_mb
    FROM unnest(w.queues) AS q(name) CROSS JOIN unnest(skipjack_region_keys(w.region)) AS k(region_key)
    CROSS JOIN LATERAL (
      SELECT j.id, j.ctid AS tid, j.need_cpu, j.need_memory_mb, j.need_disk_mb, j.priority, j.run_at FROM jobs j
      WHERE j.state = 'pending' AND j.queue = q.name AND j.region_key = k.region_key AND j.run_at <= now()
        AND (k.region_key <> '*' OR w.region = ANY (j.regions))
        AND j.need_cpu <= free_cpu AND j.need_memory_mb <= free_memory_mb AND j.need_disk_mb <= free_disk_mb
        AND (j.label_selector IS NULL OR NOT EXISTS (
          SELECT 1 FROM jsonb_each(j.label_selector) AS s(key, allowed)
          WHERE NOT coalesce(s.allowed ? (w.labels ->> s.key), false)))
      ORDER BY j.priority DESC, j.run_at, j.id
      LIMIT free_slots FOR UPDATE OF j SKIP LOCKED
    ) AS x
    ORDER BY x.priority DESC, x.run_at, x.id
  LOOP
    seen := seen + 1;
    -- First fit in claim order: a job bigger than what is left is passed over, a smaller one after it is not.
    CONTINUE WHEN cardinality(tids) >= free_slots
      OR c.need_cpu > free_cpu OR c.need_memory_mb > free_memory_mb OR c.need_disk_mb > free_disk_mb;
    tids := tids || c.tid;
    free_cpu := free_cpu - c.need_cpu;
    free_memory_mb := free_memory_mb - c.need_memory_mb;
    free_disk_mb := free_disk_mb - c.need_disk_mb;
  END LOOP;
  IF cardinality(tids) = 0 THEN RETURN; END IF;
  -- Rows locked and left behind free up at commit without a NOTIFY of their own; claimers that
  -- skipped them would sleep as if nothing were there.
  IF seen > cardinality(tids) THEN PERFORM pg_notify('skipjack_jobs', ''); END IF;
  -- The columns start-leases.sql sets, inline (0.3 ms of a claim), by the row versions we locked
  -- (their ctid): no index to read, and no state test, which let a planner without statistics (a
  -- freshly filled table) read the whole pending index. Locked by us, they are still pending,
  -- and still where we found them. Rows come back in claim order.
  RETURN QUERY WITH started AS (
    UPDATE jobs SET state = 'running', worker_id = p_worker, lease_token = skipjack_new_lease_token(),
      lease_expires_at = now() + p_ttl_ms * interval '1 millisecond', attempts = attempts + 1, runs = runs + 1,
      started_at = now(), assigned_at = NULL, waiting_reason = NULL, placement_deadline_at = NULL,
      exit_code = NULL, signal = NULL, end_reason = NULL, error = NULL
    WHERE ctid = ANY (tids)
    RETURNING *
  )
  SELECT s.id, s.queue, s.command, s.env, s.secret_env, s.cwd, s.timeout_seconds, s.kill_signal, s.kill_grace_seconds,
    s.output_cap_bytes, s.restart, s.lease_token, s.runs
  FROM started s ORDER BY s.priority DESC, s.run_at, s.id;
END $fn$;
