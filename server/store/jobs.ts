// Job table: enqueue, read, list, cancel.
import { sql } from 'kysely';
import type { EnqueueJobParsed } from '../../protocol/schemas.js';
import type { Db, JobRow } from '../db.js';
import { HttpError, notFound } from '../errors.js';

/** Flattens constraints into the columns the claim query filters on. */
export function toInsertRow(job: EnqueueJobParsed) {
  const c = job.constraints;
  const regions = c?.region === undefined ? null : Array.isArray(c.region) ? c.region : [c.region];
  const labelSelector = c?.labels
    ? Object.fromEntries(Object.entries(c.labels).map(([k, v]) => [k, Array.isArray(v) ? v : [v]]))
    : null;
  return {
    queue: job.queue,
    command: job.command,
    env: JSON.stringify(job.env ?? {}),
    secret_env: job.secretEnv ?? [],
    cwd: job.cwd ?? null,
    priority: job.priority,
    // Unset, the database's clock decides: claims compare run_at with its now(), not ours.
    ...(job.runAt ? { run_at: job.runAt } : {}),
    max_attempts: job.maxAttempts,
    retry_backoff_seconds: job.retryBackoffSeconds,
    timeout_seconds: job.timeoutSeconds ?? null,
    kill_signal: job.killSignal ?? null,
    kill_grace_seconds: job.killGraceSeconds ?? null,
    output_cap_bytes: job.outputCapBytes ?? null,
    idempotency_key: job.idempotencyKey ?? null,
    constraints: c ? JSON.stringify(c) : null,
    preferences: job.preferences ? JSON.stringify(job.preferences) : null,
    restart: job.restart ? JSON.stringify(job.restart) : null,
    regions,
    need_cpu: c?.resources?.cpu ?? 0,
    need_memory_mb: c?.resources?.memoryMb ?? 0,
    need_disk_mb: c?.resources?.diskMb ?? 0,
    label_selector: labelSelector ? JSON.stringify(labelSelector) : null,
    // The deadline counts from when the job is due, so a job for later is not failed before then.
    placement_deadline_at: job.placementDeadlineSeconds
      ? new Date(Math.max(Date.now(), job.runAt ? Date.parse(job.runAt) : 0) + job.placementDeadlineSeconds * 1000)
      : null,
  };
}

const INSERT_CHUNK = 1000;

export interface EnqueueResult {
  job: JobRow;
  /** False when an idempotency key matched an existing job, which is returned instead. */
  created: boolean;
}

/** A job as a row to insert. */
export type InsertRow = ReturnType<typeof toInsertRow>;

/** The insert of up to INSERT_CHUNK jobs, one statement. */
export function insertStatement(db: Db, rows: InsertRow[]) {
  return db
    .insertInto('jobs')
    .values(rows)
    .onConflict((oc) => oc.column('idempotency_key').where('idempotency_key', 'is not', null).doNothing())
    .returningAll();
}

/** Whether enqueueJobs inserts these jobs in one statement (a statement takes at most 65,535 parameters). */
export const fitsOneStatement = (jobs: unknown[]) => jobs.length <= INSERT_CHUNK;

/**
 * Inserts jobs in one statement, or in parts in one transaction. A job whose idempotency key
 * exists already yields the existing job. `run` inserts rows that fit one statement; the hand-off
 * to a sleeping claim inserts them together with that claim.
 */
export async function enqueueJobs(
  db: Db,
  jobs: EnqueueJobParsed[],
  run: (rows: InsertRow[]) => Promise<JobRow[]> = (r) => insertStatement(db, r).execute() as Promise<JobRow[]>,
): Promise<EnqueueResult[]> {
  const rows = jobs.map(toInsertRow);
  const inserted = fitsOneStatement(rows)
    ? await run(rows)
    : await db.transaction().execute(async (trx) => {
        const all: JobRow[] = [];
        for (let i = 0; i < rows.length; i += INSERT_CHUNK)
          all.push(...((await insertStatement(trx, rows.slice(i, i + INSERT_CHUNK)).execute()) as JobRow[]));
        return all;
      });
  if (inserted.length === rows.length && !rows.some((r) => r.idempotency_key)) {
    return inserted.map((job) => ({ job, created: true }));
  }
  return matchByKey(db, rows, inserted);
}

async function matchByKey(db: Db, rows: InsertRow[], inserted: JobRow[]) {
  const keys = rows.map((r) => r.idempotency_key).filter((k): k is string => k !== null);
  const existing = (await db.selectFrom('jobs').selectAll().where('idempotency_key', 'in', keys).execute()) as JobRow[];
  const byKey = new Map(existing.map((j) => [j.idempotency_key, j]));
  const insertedIds = new Set(inserted.map((j) => j.id));
  const unkeyed = inserted.filter((j) => j.idempotency_key === null);
  return rows.map((r) => {
    const job = r.idempotency_key === null ? unkeyed.shift()! : byKey.get(r.idempotency_key)!;
    return { job, created: insertedIds.has(job.id) };
  });
}

export async function getJob(db: Db, id: number): Promise<JobRow> {
  const row = await db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row) throw notFound(`job ${id}`);
  return row as JobRow;
}

export interface ListJobsQuery {
  state?: string;
  queue?: string;
  /** Return jobs with ids below this one (newest first). */
  cursor?: number;
  limit: number;
}

export async function listJobs(db: Db, q: ListJobsQuery): Promise<{ jobs: JobRow[]; nextCursor: number | null }> {
  let query = db
    .selectFrom('jobs')
    .selectAll()
    .orderBy('id', 'desc')
    .limit(q.limit + 1);
  if (q.state) query = query.where('state', '=', q.state);
  if (q.queue) query = query.where('queue', '=', q.queue);
  if (q.cursor) query = query.where('id', '<', q.cursor);
  const rows = (await query.execute()) as JobRow[];
  const page = rows.slice(0, q.limit);
  return { jobs: page, nextCursor: rows.length > q.limit ? page[page.length - 1].id : null };
}

/**
 * A job not yet running is cancelled at once. A running one is flagged; its worker learns at once
 * through its held heartbeat (else at its next, a third of the lease TTL at most), kills it and
 * releases it as cancelled.
 */
export async function cancelJob(db: Db, id: number): Promise<JobRow> {
  // The NOTIFY tells a worker whose heartbeat the server holds, on whichever server, at once.
  const row = (
    await sql<JobRow>`
    WITH u AS (
      UPDATE jobs SET
        state = CASE WHEN state IN ('pending', 'assigned') THEN 'cancelled' ELSE state END,
        cancel_requested = (state = 'running'),
        finished_at = CASE WHEN state IN ('pending', 'assigned') THEN now() ELSE finished_at END,
        end_reason = CASE WHEN state IN ('pending', 'assigned') THEN 'cancelled' ELSE end_reason END,
        worker_id = CASE WHEN state = 'assigned' THEN NULL ELSE worker_id END
      WHERE id = ${id} AND state IN ('pending', 'assigned', 'running')
      RETURNING *
    )
    SELECT u.* FROM u LEFT JOIN LATERAL (
      SELECT pg_notify('skipjack_cancel', u.worker_id::text) WHERE u.cancel_requested) AS told ON true`.execute(db)
  ).rows[0];
  if (row) return row;
  const job = await getJob(db, id);
  throw new HttpError(409, 'already_finished', `job ${id} is already ${job.state}`, { state: job.state });
}

/** Every ended run, plus the one in progress (job_runs gathers them from job_attempts and the job's row). */
export async function listAttempts(db: Db, jobId: number): Promise<RunRow[]> {
  return (
    await sql<RunRow>`
    SELECT attempt, worker_id, started_at, ended_at, outcome, end_reason, exit_code, signal, error
    FROM job_runs WHERE job_id = ${jobId} ORDER BY attempt`.execute(db)
  ).rows;
}

/** A row of the job_runs view (server/sql/job-runs.sql). */
export interface RunRow {
  attempt: number;
  worker_id: string | null;
  started_at: Date;
  ended_at: Date | null;
  outcome: string | null;
  end_reason: string | null;
  exit_code: number | null;
  signal: string | null;
  error: string | null;
}
