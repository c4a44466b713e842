// Everything a worker does under a lease. Each statement matches the lease token, so a worker
// that lost its lease (expired, reclaimed) changes nothing: the fencing invariant.
import { sql } from 'kysely';
import type { z } from 'zod';
import { DEFAULT_OUTPUT_CAP_BYTES, type releaseSchema, type restartSchema } from '../../protocol/schemas.js';
import type { Db } from '../db.js';
import { HttpError, staleLease } from '../errors.js';

export type ReleaseInput = z.output<typeof releaseSchema>;

export async function heartbeatJob(db: Db, jobId: number, leaseToken: string, leaseTtlMs: number) {
  const row = (
    await sql<{ lease_expires_at: Date; cancel_requested: boolean }>`
    UPDATE jobs SET lease_expires_at = now() + ${leaseTtlMs} * interval '1 millisecond'
    WHERE id = ${jobId} AND lease_token = ${leaseToken} AND state = 'running'
    RETURNING lease_expires_at, cancel_requested`.execute(db)
  ).rows[0];
  if (!row) throw staleLease(jobId);
  return { leaseExpiresAt: row.lease_expires_at.toISOString(), cancelRequested: row.cancel_requested };
}

/** What a release answers per job: enough to log it and to wake its worker, not the whole row. */
export interface ReleasedRun {
  id: number;
  state: string;
  runs: number;
  released_by: string;
}

/**
 * Ends runs, many in one statement (skipjack_release). succeeded and cancelled are final; failed
 * retries with exponential backoff and jitter while attempts remain; requeue (a draining worker)
 * returns the job uncharged. A cancel requested while it ran wins over a retry. A release whose
 * token is not the job's live lease matches no row, changes nothing, and is absent from the answer.
 */
export async function releaseJobs(db: Db, releases: ReleaseRequest[]): Promise<Map<number, ReleasedRun>> {
  const rows = (await sql<ReleasedRun>`SELECT * FROM skipjack_release(${releaseArgs(releases)})`.execute(db)).rows;
  return new Map(rows.map((r) => [r.id, r]));
}

export type ReleaseRequest = ReleaseInput & { jobId: number };

/**
 * The releases as skipjack_release's seven arrays, one per field, in job id order: the order its
 * rows are locked in, the same for every statement that locks many jobs (no deadlock between two
 * of them). Answers are matched by job id, not by position.
 */
export function releaseArgs(releases: ReleaseRequest[]) {
  const sorted = [...releases].sort((a, b) => a.jobId - b.jobId);
  const col = <T>(f: (r: ReleaseRequest) => T) => sorted.map(f);
  const reasonOf = (r: ReleaseInput) => r.reason ?? (r.outcome === 'cancelled' ? 'cancelled' : 'exited');
  return sql`${col((r) => r.jobId)}::bigint[], ${col((r) => r.leaseToken)}::uuid[], ${col((r) => r.outcome)}::text[],
    ${col((r) => r.exitCode ?? null)}::int[], ${col((r) => r.signal ?? null)}::text[], ${col((r) => r.error ?? null)}::text[],
    ${col(reasonOf)}::text[]`;
}

/**
 * Records the current run as 'restarted' and starts the next one; the lease stays. Only for a job
 * whose restart policy restarts at all: the worker applies the policy's limits, the server that
 * the job has one.
 */
export async function recordRestart(db: Db, jobId: number, r: z.output<typeof restartSchema>): Promise<number> {
  // Under one lease only restarts move `runs`: one past the reported run means this restart is recorded.
  const ended = r.run ?? null;
  const row = (
    await sql<{ restartable: boolean; runs: number; bumped: number | null }>`
    WITH cur AS (
      SELECT id, runs, worker_id, started_at, coalesce(restart ->> 'policy', 'never') <> 'never' AS restartable,
        ${ended}::int IS NULL OR runs = ${ended}::int AS opens FROM jobs
      WHERE id = ${jobId} AND lease_token = ${r.leaseToken} AND state = 'running' FOR UPDATE
    ), closed AS (
      INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, ended_at, outcome, exit_code, signal, end_reason)
      SELECT id, runs, worker_id, started_at, now(), 'restarted', ${r.exitCode ?? null}::int, ${r.signal ?? null}::text, ${r.reason ?? 'exited'}::text
      FROM cur WHERE restartable AND opens
    ), bumped AS (
      UPDATE jobs j SET runs = j.runs + 1, started_at = now() FROM cur WHERE j.id = cur.id AND cur.restartable AND cur.opens RETURNING j.runs
    )
    SELECT cur.restartable, cur.runs, bumped.runs AS bumped FROM cur LEFT JOIN bumped ON true`.execute(db)
  ).rows[0];
  if (!row) throw staleLease(jobId);
  if (!row.restartable)
    throw new HttpError(
      409,
      'no_restart_policy',
      `job ${jobId} has no restart policy that restarts it; release it instead`,
    );
  if (row.bumped !== null) return row.bumped;
  if (row.runs === ended! + 1) return row.runs;
  throw new HttpError(
    409,
    'run_mismatch',
    `body.run: job ${jobId} is in run ${row.runs}; run ${ended} is not the one that ended`,
  );
}

export interface AppendResult {
  /** Bytes of this run's output stored so far: where the next chunk must start. */
  end: number;
  stored: number;
}

/**
 * Appends output chunks idempotently. A chunk the server already has (a retry) is skipped, an
 * overlapping one is trimmed, and one that starts past the end is a gap, refused with 409 so
 * the worker resends from `end`.
 */
export async function appendLogs(
  db: Db,
  jobId: number,
  leaseToken: string,
  chunks: { offset: number; stream: string; data: Buffer }[],
): Promise<AppendResult> {
  return db.transaction().execute(async (trx) => {
    const job = (
      await sql<{ runs: number; cap: number | null }>`
      SELECT runs, output_cap_bytes AS cap FROM jobs WHERE id = ${jobId} AND lease_token = ${leaseToken} AND state = 'running'
      FOR NO KEY UPDATE`.execute(trx)
    ).rows[0];
    if (!job) throw staleLease(jobId);
    // The worker cuts output at the cap and adds its marker; a worker that does not is cut here.
    const limit = Number(job.cap ?? DEFAULT_OUTPUT_CAP_BYTES) + MARKER_ROOM_BYTES;
    let end = await logEnd(trx as unknown as Db, jobId, job.runs);
    const rows = [];
    for (const c of [...chunks].sort((a, b) => a.offset - b.offset)) {
      const chunkEnd = c.offset + c.data.length;
      if (chunkEnd <= end) continue;
      // Past the limit nothing is kept, so nothing can be missing either.
      if (c.offset > end && end < limit) throw gapError(jobId, end, c.offset);
      const kept = Math.min(chunkEnd, limit);
      if (kept > end)
        rows.push({
          job_id: jobId,
          attempt: job.runs,
          byte_offset: end,
          stream: c.stream,
          data: c.data.subarray(end - c.offset, kept - c.offset),
        });
      end = chunkEnd;
    }
    if (rows.length > 0) {
      await trx
        .insertInto('job_logs')
        .values(rows)
        .onConflict((oc) => oc.doNothing())
        .execute();
      await sql`SELECT pg_notify('skipjack_logs', ${String(jobId)})`.execute(trx);
    }
    return { end, stored: rows.reduce((n, r) => n + r.data.length, 0) };
  });
}

/** Past the cap, room for the worker's truncation marker. */
const MARKER_ROOM_BYTES = 1024;

async function logEnd(db: Db, jobId: number, run: number): Promise<number> {
  const last = (
    await sql<{ end: number }>`
    SELECT byte_offset + length(data) AS end FROM job_logs
    WHERE job_id = ${jobId} AND attempt = ${run} ORDER BY byte_offset DESC LIMIT 1`.execute(db)
  ).rows[0];
  return last ? Number(last.end) : 0;
}

function gapError(jobId: number, end: number, offset: number) {
  return new HttpError(
    409,
    'log_gap',
    `job ${jobId}: chunk starts at byte ${offset} but the log ends at ${end}; resend from ${end}`,
    {
      expectedOffset: end,
    },
  );
}

/** A run's output, or every run's with a header line between runs. */
/** Where a read of output goes on from: after byte `offset` of run `run` (0, 0: the start). */
export interface LogCursor {
  run: number;
  offset: number;
}

/**
 * A page of a job's output after `from`, in run and byte order: whole chunks up to about
 * `maxBytes` (at least one), so that reading a run of a GiB never holds more than a page.
 * `attempt` keeps to one run.
 */
export async function readLogPage(
  db: Db,
  jobId: number,
  from: LogCursor,
  opts: { attempt?: number; maxBytes?: number } = {},
): Promise<{ attempt: number; byte_offset: number; data: Buffer }[]> {
  const maxBytes = opts.maxBytes ?? LOG_PAGE_BYTES;
  const onlyRun = opts.attempt === undefined ? sql`` : sql`AND attempt = ${opts.attempt}`;
  // octet_length of a stored value reads its size, not its bytes: the rows past the page cost little.
  const { rows } = await sql<{ attempt: number; byte_offset: number; data: Buffer }>`
    SELECT attempt, byte_offset, data FROM (
      SELECT attempt, byte_offset, data,
        sum(octet_length(data)) OVER (ORDER BY attempt, byte_offset) - octet_length(data) AS before
      FROM job_logs
      WHERE job_id = ${jobId} AND (attempt, byte_offset) >= (${from.run}, ${from.offset}) ${onlyRun}
      ORDER BY attempt, byte_offset LIMIT 1000) page
    WHERE before < ${maxBytes} ORDER BY attempt, byte_offset`.execute(db);
  return rows.map((r) => ({ ...r, byte_offset: Number(r.byte_offset) }));
}

/** About what one read of output holds in memory. */
export const LOG_PAGE_BYTES = 1024 * 1024;
