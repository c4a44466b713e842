// The queries /metrics reads: live jobs by queue and state, and the times of runs just claimed
// or released. Each is one statement on an index, never a scan of the jobs table per request.
import { sql } from 'kysely';
import type { Db } from '../db.js';

export interface QueueStateRow {
  queue: string;
  state: string;
  jobs: number;
  /** Seconds the longest-waiting due pending job has waited (pending rows only). */
  oldest_due_seconds: number | null;
}

/**
 * Jobs not yet ended, by queue and state. Pending rows are read index-only from
 * jobs_pending_claim_idx (queue and run_at are in it), running and assigned ones through
 * jobs_held_idx: never the ended jobs, which may be millions.
 */
export const liveJobsByQueueSql = sql<QueueStateRow>`
    SELECT queue, 'pending' AS state, count(*)::int AS jobs,
           extract(epoch FROM now() - min(run_at) FILTER (WHERE run_at <= now()))::float8 AS oldest_due_seconds
    FROM jobs WHERE state = 'pending' GROUP BY queue
    UNION ALL
    SELECT queue, state, count(*)::int, NULL FROM jobs
    WHERE state IN ('running', 'assigned') AND worker_id IS NOT NULL GROUP BY queue, state`;

export async function liveJobsByQueue(db: Db): Promise<QueueStateRow[]> {
  return (await liveJobsByQueueSql.execute(db)).rows;
}

export interface RunRef {
  id: number;
  runs: number;
}

/** For runs just started: how long each waited once due (started_at - run_at). */
export async function queueWaits(db: Db, started: RunRef[]): Promise<{ queue: string; seconds: number }[]> {
  if (started.length === 0) return [];
  // A job released since and due again has a new run_at: left out rather than measured wrong.
  return (
    await sql<{ queue: string; seconds: number }>`
    SELECT j.queue, greatest(0, extract(epoch FROM j.started_at - j.run_at))::float8 AS seconds
    FROM unnest(${started.map((r) => r.id)}::bigint[], ${started.map((r) => r.runs)}::int[]) AS s(id, runs)
    JOIN jobs j ON j.id = s.id AND j.runs = s.runs
    WHERE j.state <> 'pending' AND j.started_at IS NOT NULL`.execute(db)
  ).rows;
}

/**
 * For runs just released: how long each ran. A run whose job goes on is in job_attempts; the run
 * that ended its job is kept in the job's row alone (release.sql).
 */
export async function runTimes(
  db: Db,
  ended: (RunRef & { outcome: string })[],
): Promise<{ queue: string; outcome: string; seconds: number }[]> {
  if (ended.length === 0) return [];
  return (
    await sql<{ queue: string; outcome: string; seconds: number }>`
    SELECT j.queue, e.outcome,
           greatest(0, extract(epoch FROM coalesce(a.ended_at, j.finished_at) - coalesce(a.started_at, j.started_at)))::float8 AS seconds
    FROM unnest(${ended.map((r) => r.id)}::bigint[], ${ended.map((r) => r.runs)}::int[], ${ended.map((r) => r.outcome)}::text[])
      AS e(id, runs, outcome)
    JOIN jobs j ON j.id = e.id
    LEFT JOIN job_attempts a ON a.job_id = e.id AND a.attempt = e.runs
    WHERE a.ended_at IS NOT NULL OR (j.runs = e.runs AND j.finished_at IS NOT NULL)`.execute(db)
  ).rows;
}
