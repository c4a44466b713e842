-- Pending jobs a worker may run, in claim order: its queues, its region, its labels, and each no
-- bigger than what it has free. For the transaction path (queues with a filter that runs only in
-- JS); the one-statement claim (claim.sql) inlines the same filters. Every (queue, region key)
-- pair is one range of the pending index read in claim order, so jobs bound to other regions are
-- never read. Each range gives up to p_limit rows and all come back, so the caller knows every
-- row it locked.
CREATE OR REPLACE FUNCTION skipjack_candidates(w workers, p_queues text[], p_limit int,
  p_free_cpu int, p_free_memory_mb int, p_free_disk_mb int, p_lock boolean, p_job_id bigint DEFAULT NULL)
RETURNS SETOF jobs LANGUAGE plpgsql SET jit = off AS $fn$
BEGIN
  IF p_limit <= 0 THEN RETURN; END IF;
  RETURN QUERY EXECUTE format($q$
    SELECT c.* FROM unnest($1::text[]) AS q(name)
    CROSS JOIN unnest($2::text[]) AS k(region_key)
    CROSS JOIN LATERAL (
      SELECT j.* FROM jobs j
      WHERE j.state = 'pending' AND j.queue = q.name AND j.region_key = k.region_key AND j.run_at <= now()
        AND (k.region_key <> '*' OR $3 = ANY (j.regions))
        AND ($4::bigint IS NULL OR j.id = $4)
        AND j.need_cpu <= $5 AND j.need_memory_mb <= $6 AND j.need_disk_mb <= $7
        AND (j.label_selector IS NULL OR NOT EXISTS (
          SELECT 1 FROM jsonb_each(j.label_selector) AS s(key, allowed)
          WHERE NOT coalesce(s.allowed ? ($8 ->> s.key), false)))
      ORDER BY j.priority DESC, j.run_at, j.id
      LIMIT $9 %s
    ) AS c
    ORDER BY c.priority DESC, c.run_at, c.id$q$, CASE WHEN p_lock THEN 'FOR UPDATE OF j SKIP LOCKED' ELSE '' END)
  USING p_queues, skipjack_region_keys(w.region), w.region, p_job_id, p_free_cpu, p_free_memory_mb, p_free_disk_mb,
    w.labels, p_limit;
END $fn$;
