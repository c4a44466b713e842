import { sql, type Kysely, type RawBuilder } from 'kysely';
import { releaseStatement, releaseStatementOf } from './003_lean_claim_and_release.js';

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
    ${releaseFunction(releaseStatementOf({ finalRunInRow: true }))}

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
export const releaseFunction = (statement: RawBuilder<unknown>) => sql`
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
