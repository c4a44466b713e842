// Central mode: the leader assigns pending jobs to workers, reserving their capacity; each
// worker's next claim starts what was assigned to it. Also the placement deadlines and the
// return of assignments that were never started.
import { sql, type RawBuilder } from 'kysely';
import {
  allocate,
  compareJobs,
  freeCapacity,
  place,
  type PlacementJob,
  type PlacementWorker,
} from '../../placement/index.js';
import type { Db, WorkerRow } from '../db.js';
import { keyOf, pendingPage, type PendingKey } from './pending-pages.js';
import { toPlacementJob, toPlacementWorker, type PlacementJobRow } from './rows.js';
import { allocations, liveWorkers } from './workers.js';
import type { PlacementSettings } from './settings.js';

export interface ScheduleResult {
  assigned: { jobId: number; workerId: string }[];
  unplaced: { jobId: number; reason: string }[];
}

function centralQueueCondition(s: PlacementSettings): RawBuilder<unknown> | null {
  if (s.defaultMode === 'central')
    return s.overriddenQueues.length ? sql`NOT (queue = ANY(${s.overriddenQueues}::text[]))` : sql`true`;
  return s.overriddenQueues.length ? sql`queue = ANY(${s.overriddenQueues}::text[])` : null;
}

export interface ScheduleOptions {
  /** Assignments a pass makes at most, and the rows of one page. */
  batch?: number;
  /** Pending rows a pass reads at most: the bound on its cost when most of them fit nowhere. */
  maxScan?: number;
  /** Where the last pass stopped reading for lack of budget; kept by the leader between passes. */
  cursor?: ScanCursor;
}

export interface ScanCursor {
  resumeAfter?: PendingKey;
}

/**
 * One scheduling pass; run it inside the leader's transaction. It reads pending jobs in claim
 * order by pages, so jobs that fit nowhere never hold back the ones behind them, and stops once
 * it has made `batch` assignments, every worker is full, or it has read `maxScan` rows. The first
 * page always starts at the head (new urgent work); later pages continue where the previous pass
 * ran out of budget, so every pending job is looked at within a few passes however long the queue.
 */
export async function scheduleOnce(
  db: Db,
  settings: PlacementSettings,
  goneAfterMs: number,
  options: ScheduleOptions = {},
): Promise<ScheduleResult> {
  const { batch = 500, cursor = {} } = options;
  const maxScan = Math.max(batch, options.maxScan ?? batch * 10);
  const result: ScheduleResult = { assigned: [], unplaced: [] };
  const queues = centralQueueCondition(settings);
  if (!queues) return result;
  let page = await pendingPage(db, queues, batch, []);
  if (page.length === 0) return result;
  let workers = await lockLiveWorkers(db, goneAfterMs);
  const ctx = { now: Date.now() };
  // Workers only fill up during a pass, so a shape of job that fits nowhere stays unfit until
  // the next pass. Plugin filters may look at anything in a job: then each job is judged.
  const unfit = new Map<string, string>();
  const shapeOf = (job: PlacementJob) =>
    settings.filtersInSql ? JSON.stringify([job.queue, job.constraints]) : undefined;
  const shown = new Map<number, string | null>(); // each row's waiting reason as read
  const seen = new Set<number>(); // unlocked pages: a row moved in order must not count twice
  let scanned = 0;
  let requested = batch;
  for (let first = true; ; first = false) {
    scanned += page.length;
    for (const row of page) shown.set(row.id, row.waiting_reason);
    for (const job of page.map(toPlacementJob).sort(compareJobs)) {
      if (result.assigned.length >= batch) break;
      if (seen.has(job.id)) continue;
      seen.add(job.id);
      const shape = shapeOf(job);
      const known = shape === undefined ? undefined : unfit.get(shape);
      if (known !== undefined) {
        result.unplaced.push({ jobId: job.id, reason: known });
        continue;
      }
      const { chosen, summary } = place(job, workers, { ...settings.configFor(job.queue), ctx });
      if (!chosen) {
        const reason = workers.length ? summary : 'no live worker';
        if (shape !== undefined) unfit.set(shape, reason);
        result.unplaced.push({ jobId: job.id, reason });
        continue;
      }
      result.assigned.push({ jobId: job.id, workerId: chosen.id });
      workers = workers.map((w) => (w.id === chosen.id ? allocate(w, job) : w));
    }
    if (page.length < requested) {
      cursor.resumeAfter = undefined; // read to the end: the next pass starts over
      break;
    }
    if (result.assigned.length >= batch || !workers.some(hasFreeSlot)) break;
    if (scanned >= maxScan) {
      cursor.resumeAfter = keyOf(page.at(-1)!);
      break;
    }
    // After the head page, skip ahead to where the last pass ran out of budget (both keys hold).
    requested = maxScan - scanned; // the rest of the budget in one query: each query sorts the pending jobs
    page = await pendingPage(db, queues, requested, [keyOf(page.at(-1)!), first ? cursor.resumeAfter : undefined]);
  }
  // Most unfit jobs already show the reason; sending only the changed ones keeps the write small.
  await recordSchedule(db, result, (u) => shown.get(u.jobId) !== u.reason);
  return result;
}

const hasFreeSlot = (w: PlacementWorker) => w.state === 'active' && freeCapacity(w).slots > 0;

/**
 * Locks the live workers' rows before reading their allocation, so a worker's own claim (which
 * takes the same lock) cannot spend capacity this pass is about to reserve.
 */
async function lockLiveWorkers(db: Db, goneAfterMs: number): Promise<PlacementWorker[]> {
  const rows = (
    await sql<WorkerRow>`
    SELECT * FROM workers WHERE state = 'active' AND last_seen_at > now() - ${goneAfterMs} * interval '1 millisecond'
    ORDER BY id FOR UPDATE`.execute(db)
  ).rows;
  const alloc = await allocations(
    db,
    rows.map((r) => r.id),
  );
  return rows.map((r) => toPlacementWorker(r, alloc.get(r.id)));
}

/**
 * Writes the pass. The pages were read without locks, so each row is locked here, only if it is
 * still pending, with SKIP LOCKED: a job cancelled or failed meanwhile is left alone (its
 * reserved capacity stays unused until the next pass), and rows whose reason did not change are
 * not written at all. `r.assigned` keeps only what was assigned.
 */
async function recordSchedule(
  db: Db,
  r: ScheduleResult,
  changed: (u: ScheduleResult['unplaced'][number]) => boolean,
): Promise<void> {
  if (r.assigned.length > 0) {
    const done = (
      await sql<{ id: number }>`
      WITH a AS (
        SELECT * FROM unnest(${r.assigned.map((a) => a.jobId)}::bigint[], ${r.assigned.map((a) => a.workerId)}::uuid[]) AS a(id, worker_id)
      ), locked AS (
        SELECT j.id, a.worker_id FROM jobs j JOIN a ON a.id = j.id WHERE j.state = 'pending'
        ORDER BY j.id FOR UPDATE OF j SKIP LOCKED
      )
      UPDATE jobs SET state = 'assigned', worker_id = locked.worker_id, assigned_at = now(), waiting_reason = NULL, placement_deadline_at = NULL
      FROM locked WHERE jobs.id = locked.id
      RETURNING jobs.id`.execute(db)
    ).rows;
    const ids = new Set(done.map((d) => Number(d.id)));
    r.assigned = r.assigned.filter((a) => ids.has(a.jobId));
    for (const workerId of new Set(r.assigned.map((a) => a.workerId))) {
      await sql`SELECT pg_notify('skipjack_assigned', ${workerId})`.execute(db);
    }
  }
  const unplaced = r.unplaced.filter(changed);
  if (unplaced.length > 0) {
    await sql`
      WITH u AS (
        SELECT * FROM unnest(${unplaced.map((u) => u.jobId)}::bigint[], ${unplaced.map((u) => u.reason)}::text[]) AS u(id, reason)
      ), locked AS (
        SELECT j.id, u.reason FROM jobs j JOIN u ON u.id = j.id
        WHERE j.state = 'pending' AND j.waiting_reason IS DISTINCT FROM u.reason
        ORDER BY j.id FOR UPDATE OF j SKIP LOCKED
      )
      UPDATE jobs SET waiting_reason = locked.reason FROM locked WHERE jobs.id = locked.id`.execute(db);
  }
}

/** Assignments not started in time, or held by a worker that is no longer active, go back to pending. */
export async function returnStaleAssignments(
  db: Db,
  assignTimeoutMs: number,
): Promise<{ id: number; worker_id: string }[]> {
  return (
    await sql<{ id: number; worker_id: string }>`
    WITH stale AS (
      SELECT j.id, j.worker_id FROM jobs j JOIN workers w ON w.id = j.worker_id
      WHERE j.state = 'assigned' AND (j.assigned_at < now() - ${assignTimeoutMs} * interval '1 millisecond' OR w.state <> 'active')
      FOR UPDATE OF j SKIP LOCKED
    )
    UPDATE jobs SET state = 'pending', worker_id = NULL, assigned_at = NULL,
      waiting_reason = 'its assignment was not started in time; waiting to be placed again'
    FROM stale WHERE jobs.id = stale.id
    RETURNING jobs.id, stale.worker_id`.execute(db)
  ).rows;
}

/** Pending jobs past their placement deadline fail as unplaceable, with the reasons. */
export async function failMissedDeadlines(
  db: Db,
  settings: PlacementSettings,
  goneAfterMs: number,
): Promise<{ id: number; error: string }[]> {
  const overdue = (
    await sql<PlacementJobRow & { placement_deadline_at: Date }>`
    SELECT id, queue, priority, created_at, constraints, preferences, placement_deadline_at FROM jobs
    WHERE state = 'pending' AND placement_deadline_at < now()
    ORDER BY placement_deadline_at LIMIT 500 FOR UPDATE SKIP LOCKED`.execute(db)
  ).rows;
  if (overdue.length === 0) return [];
  const live = await liveWorkers(db, goneAfterMs);
  const ctx = { now: Date.now() };
  const failed = overdue.map((row) => {
    const waited =
      Math.round((new Date(row.placement_deadline_at).getTime() - new Date(row.created_at).getTime()) / 100) / 10;
    const { summary } = place(toPlacementJob(row), live, { ...settings.configFor(row.queue), ctx });
    const why = live.length === 0 ? 'no live worker' : summary;
    return { id: row.id, error: `unplaceable: not placed within ${waited}s; ${why}` };
  });
  await sql`
    UPDATE jobs SET state = 'failed', end_reason = 'unplaceable', error = f.error, finished_at = now(), waiting_reason = NULL
    FROM unnest(${failed.map((f) => f.id)}::bigint[], ${failed.map((f) => f.error)}::text[]) AS f(id, error)
    WHERE jobs.id = f.id`.execute(db);
  return failed;
}
