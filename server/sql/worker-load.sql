-- What a worker's held jobs (running or assigned) take of its capacity. plpgsql keeps the plan of
-- its statement (a LANGUAGE sql function that is not inlined plans on every call), and a generic
-- plan: the value-specific one is never cheaper here.
CREATE OR REPLACE FUNCTION skipjack_worker_load(p_worker uuid, OUT cpu int, OUT memory_mb int, OUT disk_mb int, OUT slots int)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
  SELECT coalesce(sum(j.need_cpu), 0)::int, coalesce(sum(j.need_memory_mb), 0)::int,
         coalesce(sum(j.need_disk_mb), 0)::int, count(*)::int
  FROM jobs j WHERE j.worker_id = p_worker AND j.state IN ('running', 'assigned') INTO cpu, memory_mb, disk_mb, slots;
END $fn$;
