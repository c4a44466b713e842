// Lease expiry: jobs whose worker stopped heartbeating go back to pending (or fail when their
// attempts are spent), and the lost run is recorded; so do a deregistered worker's, at once.
// Workers silent for long are marked gone.
import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../db.js';

export interface ReapedJob {
  id: number;
  state: string;
  worker_id: string;
  runs: number;
  attempts: number;
}

export async function reapExpiredLeases(db: Db, batch = 1000): Promise<ReapedJob[]> {
  return takeBackLeases(
    db,
    sql`
    SELECT id, worker_id FROM jobs WHERE state = 'running' AND lease_expires_at < now()
    ORDER BY lease_expires_at LIMIT ${batch} FOR UPDATE SKIP LOCKED`,
    'lease expired: the worker stopped heartbeating',
  );
}

/**
 * Every lease a deregistered worker holds, taken back at once. Waits on a release or heartbeat in
 * flight (no SKIP LOCKED): no lease of the worker may outlive its deregistration. Rows are locked
 * in id order, as releases and heartbeats lock them, so that none of them deadlocks with another.
 */
export async function reapWorkerLeases(db: Db, workerId: string): Promise<ReapedJob[]> {
  return takeBackLeases(
    db,
    sql`
    SELECT id, worker_id FROM jobs WHERE worker_id = ${workerId} AND state = 'running' ORDER BY id FOR UPDATE`,
    'the worker was deregistered',
  );
}

/** The runs of the rows `lost` selects (and locks) end as lost; their jobs go back to pending, or fail when their attempts are spent. */
async function takeBackLeases(db: Db, lost: RawBuilder<unknown>, error: string): Promise<ReapedJob[]> {
  return (
    await sql<ReapedJob>`
    WITH expired AS (${lost}), reaped AS (
      UPDATE jobs j SET
        state = CASE WHEN j.cancel_requested THEN 'cancelled'
                     WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'pending' END,
        worker_id = NULL, lease_token = NULL, lease_expires_at = NULL, run_at = now(),
        end_reason = 'lost', exit_code = NULL, signal = NULL, error = ${error}::text,
        finished_at = CASE WHEN j.cancel_requested OR j.attempts >= j.max_attempts THEN now() END
      FROM expired WHERE j.id = expired.id
      RETURNING j.id, j.state, expired.worker_id, j.runs, j.attempts, j.started_at
    ), recorded AS (
      INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, ended_at, outcome, end_reason, error)
      SELECT id, runs, worker_id, started_at, now(), 'lost', 'lost', ${error}::text FROM reaped
    )
    SELECT id, state, worker_id, runs, attempts FROM reaped`.execute(db)
  ).rows;
}

/** Deletes finished jobs that ended before the retention window, their runs and output with them. */
export async function deleteExpiredJobs(db: Db, retentionMs: number, batch = 1000): Promise<number> {
  const { rows } = await sql<{ id: number }>`
    WITH doomed AS (
      SELECT id FROM jobs
      WHERE state IN ('succeeded', 'failed', 'cancelled') AND finished_at < now() - ${retentionMs} * interval '1 millisecond'
      ORDER BY finished_at LIMIT ${batch} FOR UPDATE SKIP LOCKED
    ), runs AS (
      DELETE FROM job_attempts USING doomed WHERE job_attempts.job_id = doomed.id
    ), output AS (
      DELETE FROM job_logs USING doomed WHERE job_logs.job_id = doomed.id
    )
    DELETE FROM jobs USING doomed WHERE jobs.id = doomed.id RETURNING jobs.id`.execute(db);
  return rows.length;
}

/** Workers not seen for `silentMs` are gone: they no longer count as capacity. */
export async function markSilentWorkersGone(db: Db, silentMs: number): Promise<string[]> {
  return (
    await sql<{ id: string }>`
    UPDATE workers SET state = 'gone'
    WHERE state IN ('active', 'draining') AND last_seen_at < now() - ${silentMs} * interval '1 millisecond'
    RETURNING id`.execute(db)
  ).rows.map((r) => r.id);
}

/**
 * Deletes up to `batch` rows of workers gone or deregistered longer than `goneMs`, none holding a
 * job. Two statements: the first locks the rows (a claim or heartbeat of the same worker waits,
 * or has committed), the second, on a snapshot taken after the locks, checks for held jobs, so a
 * job claimed just before cannot be left pointing at a deleted worker. Runs and finished jobs
 * keep the id of the worker that ran them.
 */
export async function deleteGoneWorkers(
  trx: Db,
  goneMs: number,
  batch = 1000,
): Promise<{ deleted: number; more: boolean }> {
  const { rows: locked } = await sql<{ id: string }>`
    SELECT id FROM workers
    WHERE state IN ('gone', 'deregistered') AND last_seen_at < now() - ${goneMs} * interval '1 millisecond'
    ORDER BY last_seen_at LIMIT ${batch} FOR UPDATE SKIP LOCKED`.execute(trx);
  if (locked.length === 0) return { deleted: 0, more: false };
  const { rows } = await sql<{ id: string }>`
    DELETE FROM workers w WHERE w.id = ANY(${locked.map((r) => r.id)}::uuid[])
      AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.worker_id = w.id AND j.state IN ('running', 'assigned'))
    RETURNING w.id`.execute(trx);
  return { deleted: rows.length, more: locked.length === batch };
}
