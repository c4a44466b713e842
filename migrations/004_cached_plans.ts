import { sql, type Kysely } from 'kysely';

// Plans made once per session, not on every call:
// - a LANGUAGE sql function that is not inlined plans its body on every call (PostgreSQL 17 and
//   older); plpgsql keeps the plans of its static statements. An empty release cost 0.40 ms, of
//   which 0.33 ms was planning; the claim planned the worker's load each time. Same statements,
//   same settings, now in plpgsql;
// - plpgsql still re-plans a statement with parameters while a plan for its values looks
//   cheaper than a generic one, which for these is forever. Generic plans cut a one-job claim
//   from 0.63 to 0.35 ms of execution, and a one-job release with the next claim from 0.75 to
//   0.39 ms (PG 15 log). ANALYZE still replaces cached plans;
// - no JIT: not knowing LIMIT free_slots, the generic plan of the claim's candidates is costed
//   above jit_above_cost at 1,000,000 pending, and compiling it took 200 ms of every claim (bench
//   backlog) for a plan that reads a few index entries: 0.74 ms without. JIT never pays for
//   statements of a few rows, so none of the claim and release functions use it.
const hotFunctions = [
  'skipjack_claim(uuid, int, int)',
  'skipjack_release(bigint[], uuid[], text[], int[], text[], text[], text[])',
  'skipjack_release_and_claim(bigint[], uuid[], text[], int[], text[], text[], text[], uuid, int, int)',
  'skipjack_worker_load(uuid)',
];
const transactionPathFunctions = [
  'skipjack_candidates(workers, text[], int, int, int, int, boolean, bigint)',
  'skipjack_start_leases(uuid, bigint[], int)',
];

const load = sql`
      SELECT coalesce(sum(j.need_cpu), 0)::int, coalesce(sum(j.need_memory_mb), 0)::int,
             coalesce(sum(j.need_disk_mb), 0)::int, count(*)::int
      FROM jobs j WHERE j.worker_id = p_worker AND j.state IN ('running', 'assigned')`;

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION skipjack_worker_load(p_worker uuid, OUT cpu int, OUT memory_mb int, OUT disk_mb int, OUT slots int)
    LANGUAGE plpgsql STABLE AS $fn$
    BEGIN
      ${load} INTO cpu, memory_mb, disk_mb, slots;
    END $fn$;

    CREATE OR REPLACE FUNCTION skipjack_release(p_ids bigint[], p_tokens uuid[], p_outcomes text[], p_exit_codes int[],
      p_signals text[], p_errors text[], p_reasons text[])
    RETURNS TABLE (id bigint, state text, runs int, released_by uuid)
    LANGUAGE plpgsql SET enable_seqscan = off AS $fn$
    #variable_conflict use_column
    BEGIN
      RETURN QUERY ${releaseStatement};
    END $fn$;
  `.execute(db);
  for (const fn of hotFunctions)
    await sql`ALTER FUNCTION ${sql.raw(fn)} SET plan_cache_mode = force_generic_plan SET jit = off`.execute(db);
  for (const fn of transactionPathFunctions) await sql`ALTER FUNCTION ${sql.raw(fn)} SET jit = off`.execute(db);
  // Its generic plan must read the pending index in claim order, as every plan it has ever
  // wanted does; a bitmap scan would gather every claimable job to sort them (a test checks the
  // rows read with statistics of a shuffled backlog).
  await sql`ALTER FUNCTION skipjack_claim(uuid, int, int) SET enable_bitmapscan = off`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER FUNCTION skipjack_claim(uuid, int, int) RESET enable_bitmapscan`.execute(db);
  for (const fn of hotFunctions) await sql`ALTER FUNCTION ${sql.raw(fn)} RESET plan_cache_mode RESET jit`.execute(db);
  for (const fn of transactionPathFunctions) await sql`ALTER FUNCTION ${sql.raw(fn)} RESET jit`.execute(db);
  await sql`
    CREATE OR REPLACE FUNCTION skipjack_worker_load(p_worker uuid, OUT cpu int, OUT memory_mb int, OUT disk_mb int, OUT slots int)
    LANGUAGE sql STABLE AS $fn$ ${load} $fn$;

    CREATE OR REPLACE FUNCTION skipjack_release(p_ids bigint[], p_tokens uuid[], p_outcomes text[], p_exit_codes int[],
      p_signals text[], p_errors text[], p_reasons text[])
    RETURNS TABLE (id bigint, state text, runs int, released_by uuid)
    LANGUAGE sql SET enable_seqscan = off AS $fn$ ${releaseStatement} $fn$;
  `.execute(db);
}

/** The release statement as 003 made it, frozen here. */
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
