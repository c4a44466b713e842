-- May one new job go in already running on this sleeping worker (pending is skipped)? Yes when
-- the worker is active and not locked by a claim or a heartbeat of its own, has room for the job
-- now, and no pending job it could claim is due: then the new job is the one its claim would
-- take first. The server checks that the job's queue, region and labels suit the worker, from
-- its registration, which never changes. Used by the enqueue's hand-off (server/store).
CREATE OR REPLACE FUNCTION skipjack_can_start_new(p_worker uuid, p_cpu int, p_memory_mb int, p_disk_mb int) RETURNS boolean
LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
  w workers;
BEGIN
  SELECT * INTO w FROM workers WHERE id = p_worker AND state = 'active' FOR NO KEY UPDATE SKIP LOCKED;
  IF NOT FOUND THEN RETURN false; END IF;
  -- A statement after the lock: its snapshot holds every claim committed before ours.
  RETURN EXISTS (
      SELECT 1 FROM skipjack_worker_load(p_worker) AS l
      WHERE l.slots < w.slots AND l.cpu + p_cpu <= w.cpu AND l.memory_mb + p_memory_mb <= w.memory_mb
        AND l.disk_mb + p_disk_mb <= w.disk_mb)
    -- Any due job of its queues and regions counts, whether it fits or not: then the claim decides.
    AND NOT EXISTS (
      SELECT 1 FROM jobs j
      WHERE j.state = 'pending' AND j.queue = ANY (w.queues) AND j.run_at <= now()
        AND j.region_key = ANY (skipjack_region_keys(w.region)));
END $fn$;
