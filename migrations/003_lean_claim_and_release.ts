import { sql, type Kysely } from 'kysely';

// The hot path, leaner (each step measured in bench/, see bench/HISTORY.md):
// - skipjack_claim static and inlined: plpgsql keeps the plans of static statements, where EXECUTE
//   plans every call, and a called set-returning function materializes its rows first. A one-job
//   claim on an idle system: 3.0 -> 2.2 ms p50, what a bare UPDATE ... SKIP LOCKED claim costs here.
//   Its filters are those of skipjack_candidates (002), which the transaction path still uses;
// - it answers with the columns a worker needs, not the whole row;
// - the release is a function, so it can forbid sequential scans, and a worker's release and its
//   next claim can be one statement with one commit;
// - one index fewer written by every state change.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    -- Every claim, release and heartbeat wrote an entry to (state, id): 13% of a claim-and-release
    -- cycle. Listing by state still finds its rows by an index: running ones through the lease
    -- index, succeeded ones are most rows, and pending, failed and cancelled ones through this
    -- one, which a job enters when enqueued, retried or ended badly, not when claimed or released.
    DROP INDEX jobs_state_id_idx;
    CREATE INDEX jobs_listing_idx ON jobs (state, id) WHERE state IN ('pending', 'failed', 'cancelled');

    DROP FUNCTION skipjack_claim(uuid, int, int);
    -- Only the columns a worker needs to run the job (a third of them), in claim order: wide rows
    -- cost the server more to parse and to answer with than the claim itself.
    -- Never a sequential scan: on a small table whose rows are all in memory, the planner rates
    -- reading every job cheaper than 250 lookups, and is wrong by 4 ms a claim.
    CREATE FUNCTION skipjack_claim(p_worker uuid, p_max int, p_ttl_ms int)
    RETURNS TABLE (id bigint, queue text, command text[], env jsonb, secret_env text[], cwd text,
      timeout_seconds real, kill_signal text, kill_grace_seconds real, output_cap_bytes bigint, restart jsonb,
      lease_token uuid, runs int)
    LANGUAGE plpgsql SET enable_seqscan = off AS $fn$
    #variable_conflict use_column
    DECLARE
      w workers;
      c record;
      free_cpu int; free_memory_mb int; free_disk_mb int; free_slots int;
      region_keys text[];
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
      region_keys := CASE WHEN w.region IS NULL THEN ARRAY[''] ELSE ARRAY(SELECT DISTINCT unnest(ARRAY['', '*', w.region])) END;
      FOR c IN
        SELECT x.tid, x.need_cpu, x.need_memory_mb, x.need_disk_mb
        FROM unnest(w.queues) AS q(name) CROSS JOIN unnest(region_keys) AS k(region_key)
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
      -- skipjack_start_leases inlined (0.3 ms of the gain), setting the same columns. By the row
      -- versions we locked (their ctid): no index to read, and no state test, which let a planner
      -- without statistics (a freshly filled table) read the whole pending index. Locked by us,
      -- they are still pending, and still where we found them. Rows come back in claim order.
      RETURN QUERY WITH started AS (
        UPDATE jobs SET state = 'running', worker_id = p_worker, lease_token = gen_random_uuid(),
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

    -- Ends runs, many in one statement (server/store/leases.ts says how). A function for its
    -- setting: a planner without statistics joined the batch to every job by sequential scan.
    CREATE FUNCTION skipjack_release(p_ids bigint[], p_tokens uuid[], p_outcomes text[], p_exit_codes int[],
      p_signals text[], p_errors text[], p_reasons text[])
    RETURNS TABLE (id bigint, state text, runs int, released_by uuid)
    LANGUAGE sql SET enable_seqscan = off AS $fn$
      ${releaseStatement}
    $fn$;

    -- A worker's finished runs, then its next claim, in one statement and one commit: the claim
    -- sees the room the release made. Rows of kind 'released' answer the releases, 'claimed' ones
    -- are the claim; 'no_worker' says the worker is unknown (the releases still count).
    CREATE FUNCTION skipjack_release_and_claim(p_ids bigint[], p_tokens uuid[], p_outcomes text[], p_exit_codes int[],
      p_signals text[], p_errors text[], p_reasons text[], p_worker uuid, p_max int, p_ttl_ms int)
    RETURNS TABLE (kind text, id bigint, state text, released_by uuid, queue text, command text[], env jsonb,
      secret_env text[], cwd text, timeout_seconds real, kill_signal text, kill_grace_seconds real, output_cap_bytes bigint,
      restart jsonb, lease_token uuid, runs int)
    LANGUAGE plpgsql AS $fn$
    DECLARE
      known boolean;
    BEGIN
      -- The worker row first, then job rows, as a heartbeat takes them: the other order could
      -- deadlock with a heartbeat naming a job being released. (Worker rows are never deleted.)
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
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP FUNCTION skipjack_release_and_claim(bigint[], uuid[], text[], int[], text[], text[], text[], uuid, int, int);
    DROP FUNCTION skipjack_release(bigint[], uuid[], text[], int[], text[], text[], text[]);
    DROP FUNCTION skipjack_claim(uuid, int, int);`.execute(db);
  await claimFunction002.execute(db);
  await sql`DROP INDEX jobs_listing_idx; CREATE INDEX jobs_state_id_idx ON jobs (state, id)`.execute(db);
}

/** The release, one statement; 004 moves it into plpgsql unchanged. */
const releaseStatement = sql`
      WITH cur AS (
        SELECT j.id, j.runs, j.worker_id, j.started_at, i.outcome, i.exit_code, i.signal, i.error, i.reason, CASE
            WHEN i.outcome = 'succeeded' THEN 'succeeded'
            WHEN i.outcome = 'cancelled' OR j.cancel_requested THEN 'cancelled'
            WHEN i.outcome = 'requeue' THEN 'pending'
            WHEN j.attempts < j.max_attempts THEN 'pending'
            ELSE 'failed' END AS next_state,
          -- the backoff doubles per attempt, capped at an hour; jitter takes 0-50% off it
          least(j.retry_backoff_seconds * power(2, greatest(j.attempts - 1, 0)), 3600) * (1 - random() / 2) AS backoff
        FROM unnest(p_ids, p_tokens, p_outcomes, p_exit_codes, p_signals, p_errors, p_reasons) AS i(id, token, outcome, exit_code, signal, error, reason)
        -- A token is set only while the job runs (a CHECK): the token match is the state test.
        JOIN jobs j ON j.id = i.id AND j.lease_token = i.token
        FOR UPDATE OF j
      ), released AS (
        UPDATE jobs j SET
          state = cur.next_state,
          attempts = CASE WHEN cur.outcome = 'requeue' THEN j.attempts - 1 ELSE j.attempts END,
          run_at = CASE WHEN cur.next_state = 'pending' AND cur.outcome = 'failed'
                        THEN now() + cur.backoff * interval '1 second' ELSE j.run_at END,
          worker_id = NULL, lease_token = NULL, lease_expires_at = NULL,
          exit_code = cur.exit_code, signal = cur.signal, error = cur.error, end_reason = cur.reason,
          finished_at = CASE WHEN cur.next_state = 'pending' THEN NULL ELSE now() END
        FROM cur WHERE j.id = cur.id
        RETURNING j.id, j.state, j.runs, cur.worker_id AS released_by
      ), recorded AS (
        INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, ended_at, outcome, exit_code, signal, error, end_reason)
        SELECT id, runs, worker_id, started_at, now(), outcome, exit_code, signal, error, reason FROM cur
      )
      SELECT * FROM released`;

/** skipjack_claim as 002 made it, frozen here for the down. */
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
