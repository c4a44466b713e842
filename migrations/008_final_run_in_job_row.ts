import { sql, type Kysely, type RawBuilder } from 'kysely';

// A run that ends its job is recorded in the job's row alone, not also in job_attempts: the row
// keeps that run's times, exit code, signal, error and end reason, and now its worker
// (last_worker_id; worker_id is only for a job held). One insert and its index entry fewer for
// nearly every job, where PostgreSQL is what limits a drain. A run whose job goes on (a retry, a
// requeue, a restart, a lost lease) or whose outcome is not the job's end (a failure after a
// cancel was asked) is still written to job_attempts before the row moves on. job_runs shows
// every run of every job, from both places, plus the one in progress.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE jobs ADD COLUMN last_worker_id uuid;
    ${releaseFunction(releaseStatementKeepingFinalRun)}

    CREATE VIEW job_runs AS
      SELECT job_id, attempt, worker_id, started_at, ended_at, outcome, end_reason, exit_code, signal, error
      FROM job_attempts
      UNION ALL
      ${finalRunsKeptInJobRow}
      UNION ALL
      SELECT id, runs, worker_id, started_at, NULL, NULL, NULL, NULL, NULL, NULL
      FROM jobs WHERE state = 'running';
  `.execute(db);
}

/** skipjack_release as 004 left it (its settings included), around the statement given. */
const releaseFunction = (statement: RawBuilder<unknown>) => sql`
    CREATE OR REPLACE FUNCTION skipjack_release(p_ids bigint[], p_tokens uuid[], p_outcomes text[], p_exit_codes int[],
      p_signals text[], p_errors text[], p_reasons text[])
    RETURNS TABLE (id bigint, state text, runs int, released_by uuid)
    LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
    #variable_conflict use_column
    BEGIN
      RETURN QUERY ${statement};
    END $fn$;`;

/** Runs that ended their job and are recorded in its row alone, as job_attempts rows would be. */
const finalRunsKeptInJobRow = sql`
      SELECT j.id, j.runs, j.last_worker_id, j.started_at, j.finished_at, j.state, j.end_reason, j.exit_code, j.signal, j.error
      FROM jobs j
      WHERE j.state IN ('succeeded', 'failed', 'cancelled') AND j.last_worker_id IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = j.id AND a.attempt = j.runs)`;

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, ended_at, outcome, end_reason, exit_code, signal, error)
    ${finalRunsKeptInJobRow};
    DROP VIEW job_runs;
    ${releaseFunction(releaseStatement)}
    ALTER TABLE jobs DROP COLUMN last_worker_id;
  `.execute(db);
}

/** The release as 003 made it, frozen here for the down. */
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

/** The same release, keeping the run that ends its job in the job's row alone, with its worker. */
const releaseStatementKeepingFinalRun = sql`
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
          worker_id = NULL, lease_token = NULL, lease_expires_at = NULL, last_worker_id = cur.worker_id,
          exit_code = cur.exit_code, signal = cur.signal, error = cur.error, end_reason = cur.reason,
          finished_at = CASE WHEN cur.next_state = 'pending' THEN NULL ELSE now() END
        FROM cur WHERE j.id = cur.id
        RETURNING j.id, j.state, j.runs, cur.worker_id AS released_by
      ), recorded AS (
        INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, ended_at, outcome, exit_code, signal, error, end_reason)
        SELECT id, runs, worker_id, started_at, now(), outcome, exit_code, signal, error, reason FROM cur
        WHERE cur.outcome IS DISTINCT FROM cur.next_state
      )
      SELECT * FROM released`;
