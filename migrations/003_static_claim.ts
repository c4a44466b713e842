import { sql, type Kysely } from 'kysely';
import { claimFunction002 } from './002_claim_in_one_statement.js';

// skipjack_claim with its parts inlined and its SQL static: plpgsql keeps the plans of static
// statements for the session, where EXECUTE plans every call, and a called set-returning function
// materializes its rows first. A one-job claim on an idle system goes from 3.0 to 2.2 ms (p50),
// which is what a bare UPDATE ... SKIP LOCKED claim costs here; a 250-job claim from 11 to 9.5 ms.
// The filters are those of skipjack_candidates (002), which the transaction path still uses.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION skipjack_claim(p_worker uuid, p_max int, p_ttl_ms int)
    RETURNS SETOF jobs LANGUAGE plpgsql AS $fn$
    DECLARE
      w workers;
      c record;
      free_cpu int; free_memory_mb int; free_disk_mb int; free_slots int;
      region_keys text[];
      ids bigint[] := '{}';
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
      region_keys := CASE WHEN w.region IS NULL THEN ARRAY[''] ELSE ARRAY(SELECT DISTINCT unnest(ARRAY['', '*', w.region])) END;
      FOR c IN
        SELECT x.id, x.need_cpu, x.need_memory_mb, x.need_disk_mb
        FROM unnest(w.queues) AS q(name) CROSS JOIN unnest(region_keys) AS k(region_key)
        CROSS JOIN LATERAL (
          SELECT j.id, j.need_cpu, j.need_memory_mb, j.need_disk_mb, j.priority, j.run_at FROM jobs j
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
        CONTINUE WHEN cardinality(ids) >= free_slots
          OR c.need_cpu > free_cpu OR c.need_memory_mb > free_memory_mb OR c.need_disk_mb > free_disk_mb;
        ids := ids || c.id;
        free_cpu := free_cpu - c.need_cpu;
        free_memory_mb := free_memory_mb - c.need_memory_mb;
        free_disk_mb := free_disk_mb - c.need_disk_mb;
      END LOOP;
      IF cardinality(ids) = 0 THEN RETURN; END IF;
      -- Rows locked and left behind free up at commit without a NOTIFY of their own; claimers that
      -- skipped them would sleep as if nothing were there.
      IF seen > cardinality(ids) THEN PERFORM pg_notify('skipjack_jobs', ''); END IF;
      -- skipjack_start_leases inlined (0.3 ms of the gain): the same columns set, for pending jobs only.
      RETURN QUERY UPDATE jobs SET state = 'running', worker_id = p_worker, lease_token = gen_random_uuid(),
        lease_expires_at = now() + p_ttl_ms * interval '1 millisecond', attempts = attempts + 1, runs = runs + 1,
        started_at = now(), assigned_at = NULL, waiting_reason = NULL, placement_deadline_at = NULL,
        exit_code = NULL, signal = NULL, end_reason = NULL, error = NULL
      WHERE id = ANY (ids) AND state = 'pending'
      RETURNING *;
    END $fn$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await claimFunction002.execute(db);
}
