import { sql, type Kysely } from 'kysely';

// The claim path moves into the database, so a pull claim is one statement: one round trip and
// one implicit transaction instead of five. Also:
// - "any region" is '' instead of NULL: `region_key = ''` is an equality, so the pending index
//   is read already in claim order; `IS NULL` is not, and every claim sorted all such jobs;
// - no foreign keys on the hot path: per-row checks cost a batch claim or release more than its
//   index updates. Worker rows are never deleted; a job's runs and output are written only under
//   its live lease and deleted with it by retention (store/reaper.ts).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX jobs_pending_claim_idx;
    ALTER TABLE jobs DROP COLUMN region_key;
    ALTER TABLE jobs ADD COLUMN region_key text NOT NULL GENERATED ALWAYS AS (
      CASE WHEN regions IS NULL THEN '' WHEN cardinality(regions) = 1 THEN regions[1] ELSE '*' END) STORED;
    CREATE INDEX jobs_pending_claim_idx ON jobs (queue, region_key, priority DESC, run_at, id) WHERE state = 'pending';
    ALTER TABLE jobs DROP CONSTRAINT jobs_worker_id_fkey;
    ALTER TABLE job_attempts DROP CONSTRAINT job_attempts_worker_id_fkey;
    ALTER TABLE job_attempts DROP CONSTRAINT job_attempts_job_id_fkey;
    ALTER TABLE job_logs DROP CONSTRAINT job_logs_job_id_fkey;

    -- What a worker's held jobs (running or assigned) take of its capacity.
    CREATE FUNCTION skipjack_worker_load(p_worker uuid, OUT cpu int, OUT memory_mb int, OUT disk_mb int, OUT slots int)
    LANGUAGE sql STABLE AS $$
      SELECT coalesce(sum(need_cpu), 0)::int, coalesce(sum(need_memory_mb), 0)::int,
             coalesce(sum(need_disk_mb), 0)::int, count(*)::int
      FROM jobs WHERE worker_id = p_worker AND state IN ('running', 'assigned')
    $$;

    -- Pending jobs the worker may run, in claim order: its queues, its region, its labels, and each
    -- no bigger than what it has free. Every (queue, region key) pair is one index range read in
    -- claim order, so jobs bound to other regions are never read, however many wait. Each range
    -- gives up to p_limit rows and all come back, so the caller knows every row it locked.
    CREATE FUNCTION skipjack_candidates(w workers, p_queues text[], p_limit int,
      p_free_cpu int, p_free_memory_mb int, p_free_disk_mb int, p_lock boolean, p_job_id bigint DEFAULT NULL)
    RETURNS SETOF jobs LANGUAGE plpgsql AS $fn$
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
      -- Region keys: '' (any region); with a region of its own, also that one and '*' (a set).
      USING p_queues, CASE WHEN w.region IS NULL THEN ARRAY[''] ELSE ARRAY(SELECT DISTINCT unnest(ARRAY['', '*', w.region])) END,
        w.region, p_job_id, p_free_cpu, p_free_memory_mb, p_free_disk_mb, w.labels, p_limit;
    END $fn$;

    -- Starts runs: pending jobs this claim locked, or jobs central mode assigned to this worker.
    -- The run's job_attempts row is written once, when it ends; until then the job row is the record.
    -- Unordered: sorting wide rows here cost a 250-job claim a sixth of its time; the server sorts.
    CREATE FUNCTION skipjack_start_leases(p_worker uuid, p_ids bigint[], p_ttl_ms int)
    RETURNS SETOF jobs LANGUAGE sql AS $$
      UPDATE jobs SET state = 'running', worker_id = p_worker, lease_token = gen_random_uuid(),
        lease_expires_at = now() + p_ttl_ms * interval '1 millisecond', attempts = attempts + 1, runs = runs + 1,
        started_at = now(), assigned_at = NULL, waiting_reason = NULL, placement_deadline_at = NULL,
        exit_code = NULL, signal = NULL, end_reason = NULL, error = NULL
      WHERE id = ANY (p_ids) AND (state = 'pending' OR (state = 'assigned' AND worker_id = p_worker))
      RETURNING *
    $$;

  `.execute(db);
  await claimFunction002.execute(db);
}

/** 003 replaces it; its down puts a frozen copy of this one back. */
const claimFunction002 = sql`
    -- A pull claim in one statement, for queues whose filters all run in SQL (the built-ins).
    CREATE OR REPLACE FUNCTION skipjack_claim(p_worker uuid, p_max int, p_ttl_ms int)
    RETURNS SETOF jobs LANGUAGE plpgsql AS $fn$
    DECLARE
      w workers;
      c jobs;
      free_cpu int; free_memory_mb int; free_disk_mb int; free_slots int;
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
      SELECT w.cpu - l.cpu, w.memory_mb - l.memory_mb, w.disk_mb - l.disk_mb, w.slots - l.slots
        INTO free_cpu, free_memory_mb, free_disk_mb, free_slots FROM skipjack_worker_load(w.id) AS l;
      FOR c IN SELECT * FROM skipjack_candidates(w, w.queues, least(p_max, free_slots), free_cpu, free_memory_mb, free_disk_mb, true) LOOP
        seen := seen + 1;
        -- First fit in claim order: a job bigger than what is left is passed over, a smaller one after it is not.
        CONTINUE WHEN cardinality(ids) >= least(p_max, free_slots)
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
      RETURN QUERY SELECT * FROM skipjack_start_leases(p_worker, ids, p_ttl_ms);
    END $fn$;
`;

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP FUNCTION skipjack_claim(uuid, int, int);
    DROP FUNCTION skipjack_start_leases(uuid, bigint[], int);
    DROP FUNCTION skipjack_candidates(workers, text[], int, int, int, int, boolean, bigint);
    DROP FUNCTION skipjack_worker_load(uuid);
    ALTER TABLE job_logs ADD CONSTRAINT job_logs_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE;
    ALTER TABLE job_attempts ADD CONSTRAINT job_attempts_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE;
    ALTER TABLE job_attempts ADD CONSTRAINT job_attempts_worker_id_fkey FOREIGN KEY (worker_id) REFERENCES workers (id);
    ALTER TABLE jobs ADD CONSTRAINT jobs_worker_id_fkey FOREIGN KEY (worker_id) REFERENCES workers (id);
    DROP INDEX jobs_pending_claim_idx;
    ALTER TABLE jobs DROP COLUMN region_key;
    ALTER TABLE jobs ADD COLUMN region_key text GENERATED ALWAYS AS (
      CASE WHEN regions IS NULL THEN NULL WHEN cardinality(regions) = 1 THEN regions[1] ELSE '*' END) STORED;
    CREATE INDEX jobs_pending_claim_idx ON jobs (queue, region_key, priority DESC, run_at, id) WHERE state = 'pending';
  `.execute(db);
}
