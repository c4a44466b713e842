// Claims: a worker takes the jobs assigned to it (central mode) and pending jobs it may run
// (pull mode), up to its free capacity.
import { sql, type RawBuilder, type Transaction } from 'kysely';
import { firstFailure, rankJobsForWorker, type PlacementJob } from '../../placement/index.js';
import type { Database, Db, JobRow, WorkerRow } from '../db.js';
import { notFound, HttpError } from '../errors.js';
import { toPlacementJob, toPlacementWorker, type PlacementJobRow } from '../placement/rows.js';
import { hasCentralQueues, type PlacementSettings } from '../placement/settings.js';
import type { Allocation } from './workers.js';

export interface ClaimOptions {
  max: number;
  leaseTtlMs: number;
  /** Claim this job only (the single-job claim endpoint). */
  jobId?: number;
}

type Candidate = PlacementJobRow & { alloc_cpu: number; alloc_memory_mb: number; alloc_disk_mb: number; alloc_slots: number };

/**
 * One transaction: lock the worker row (so two claims by one worker cannot both spend its free
 * capacity), start what central mode assigned to it, then select pending jobs that fit with
 * FOR UPDATE SKIP LOCKED (so claimers never wait on each other), let the placement filters
 * and the capacity fit pick among them, and start their leases.
 */
export async function claimJobs(db: Db, settings: PlacementSettings, workerId: string, opts: ClaimOptions): Promise<JobRow[]> {
  return db.transaction().execute(async (trx) => {
    const worker = await lockWorker(trx, workerId);
    if (worker.state !== 'active') return [];
    const assigned = opts.jobId === undefined && hasCentralQueues(settings) ? await startAssigned(trx, worker.id, opts.max, opts.leaseTtlMs) : [];
    const max = opts.max - assigned.length;
    const queues = worker.queues.filter((q) => settings.modeFor(q) === 'pull');
    if (max <= 0 || queues.length === 0) return assigned;
    const candidates = await selectCandidates(trx, worker, queues, max, opts.jobId);
    const chosen = choose(settings, worker, candidates, max);
    // Rows we locked but leave behind free up at commit without a NOTIFY of their own; without
    // one, claimers that skipped them as locked would sleep as if nothing were there. Only a claim
    // that took something says so: one that took nothing would wake itself again, forever.
    if (chosen.length > 0 && candidates.length > chosen.length) await sql`SELECT pg_notify('skipjack_jobs', '')`.execute(trx);
    if (chosen.length === 0) return assigned;
    return [...assigned, ...(await startLeases(trx, worker.id, chosen.map((c) => c.id), opts.leaseTtlMs))];
  });
}


// A row lock, not an update: liveness comes from heartbeats, and a claim need not write the row.
// NO KEY: it must not block the foreign-key checks of jobs being assigned to this worker.
async function lockWorker(trx: Transaction<Database>, workerId: string): Promise<WorkerRow> {
  const row = (await sql<WorkerRow>`
    SELECT * FROM workers WHERE id = ${workerId} FOR NO KEY UPDATE`.execute(trx)).rows[0];
  if (!row) throw notFound(`worker ${workerId}`);
  return row;
}

/**
 * Region, resources and labels are checked in SQL. Each (queue, region kind) is its own branch
 * over the pending index, so jobs bound to other regions are never read, however many wait.
 * The statement runs after the worker lock, so its allocation sees every claim before ours.
 */
async function selectCandidates(trx: Transaction<Database>, w: WorkerRow, queues: string[], max: number, jobId?: number, lock = true): Promise<Candidate[]> {
  return (await candidateQuery(w, queues, max, jobId, lock).execute(trx)).rows;
}

/** The candidate statement on its own, so a test can EXPLAIN what it reads. */
export function candidateQuery(w: WorkerRow, queues: string[], max: number, jobId?: number, lock = true): RawBuilder<Candidate> {
  const labels = JSON.stringify(w.labels);
  const regionKinds: RawBuilder<unknown>[] = [sql`j.region_key IS NULL`, sql`j.region_key = '*' AND ${w.region}::text = ANY(j.regions)`];
  if (w.region) regionKinds.push(sql`j.region_key = ${w.region}`);
  const branches = queues.flatMap((queue) => regionKinds.map((region) => sql`
    SELECT j.id, j.queue, j.priority, j.run_at, j.created_at, j.constraints, j.preferences,
           alloc.cpu AS alloc_cpu, alloc.memory_mb AS alloc_memory_mb, alloc.disk_mb AS alloc_disk_mb, alloc.slots AS alloc_slots
    FROM jobs j, alloc
    WHERE j.state = 'pending' AND j.queue = ${queue} AND ${region} AND j.run_at <= now()
      ${jobId === undefined ? sql`` : sql`AND j.id = ${jobId}`}
      AND alloc.slots < ${w.slots}
      AND j.need_cpu <= ${w.cpu} - alloc.cpu
      AND j.need_memory_mb <= ${w.memory_mb} - alloc.memory_mb
      AND j.need_disk_mb <= ${w.disk_mb} - alloc.disk_mb
      AND (j.label_selector IS NULL OR NOT EXISTS (
        SELECT 1 FROM jsonb_each(j.label_selector) AS s(k, v) WHERE NOT coalesce(v ? (${labels}::jsonb ->> s.k), false)))
    ORDER BY j.priority DESC, j.run_at, j.id
    LIMIT ${max}
    ${lock ? sql`FOR UPDATE OF j SKIP LOCKED` : sql``}`));
  // Locking is not allowed under UNION, so each branch is a CTE of its own.
  const ctes = branches.map((b, i) => sql`, ${sql.raw(`b${i}`)} AS (${b})`);
  const union = sql.join(branches.map((_, i) => sql.raw(`SELECT * FROM b${i}`)), sql` UNION ALL `);
  return sql<Candidate>`
    WITH alloc AS (
      SELECT coalesce(sum(need_cpu), 0)::int AS cpu, coalesce(sum(need_memory_mb), 0)::int AS memory_mb,
             coalesce(sum(need_disk_mb), 0)::int AS disk_mb, count(*)::int AS slots
      FROM jobs WHERE worker_id = ${w.id} AND state IN ('running', 'assigned')
    )${sql.join(ctes, sql``)}
    SELECT * FROM (${union}) AS c
    ORDER BY priority DESC, run_at, id
    LIMIT ${max}`;
}

/** Every filter of the job's queue (plugins included), then the cumulative capacity fit. */
function choose(settings: PlacementSettings, w: WorkerRow, candidates: Candidate[], max: number): PlacementJob[] {
  if (candidates.length === 0) return [];
  const c0 = candidates[0];
  const alloc: Allocation = { cpu: c0.alloc_cpu, memoryMb: c0.alloc_memory_mb, diskMb: c0.alloc_disk_mb, slots: c0.alloc_slots };
  const worker = toPlacementWorker(w, alloc);
  const ctx = { now: Date.now() };
  const eligible = candidates.map(toPlacementJob).filter((job) => firstFailure(job, worker, settings.configFor(job.queue).filters, ctx) === null);
  return rankJobsForWorker(eligible, worker, { filters: [], ctx, max }).claim;
}

async function startLeases(trx: Transaction<Database>, workerId: string, ids: number[], ttlMs: number) {
  return leaseStart(trx, sql`id = ANY(${ids}::bigint[]) AND state = 'pending'`, workerId, ttlMs);
}

/** Central mode: the jobs the scheduler reserved on this worker start now. */
async function startAssigned(trx: Transaction<Database>, workerId: string, max: number, ttlMs: number) {
  return leaseStart(trx, sql`id IN (
    SELECT id FROM jobs WHERE worker_id = ${workerId} AND state = 'assigned' ORDER BY assigned_at, id LIMIT ${max})`, workerId, ttlMs);
}

async function leaseStart(trx: Transaction<Database>, where: RawBuilder<unknown>, workerId: string, ttlMs: number) {
  // The run's job_attempts row is written once, when it ends; until then the job row is the record.
  return (await sql<JobRow>`
    WITH claimed AS (
      UPDATE jobs SET state = 'running', worker_id = ${workerId}, lease_token = gen_random_uuid(),
        lease_expires_at = now() + ${ttlMs} * interval '1 millisecond', attempts = attempts + 1, runs = runs + 1,
        started_at = now(), assigned_at = NULL, waiting_reason = NULL, placement_deadline_at = NULL,
        exit_code = NULL, signal = NULL, end_reason = NULL, error = NULL
      WHERE ${where}
      RETURNING *
    )
    SELECT * FROM claimed ORDER BY priority DESC, run_at, id`.execute(trx)).rows;
}

/** The single-job claim: 409 when the job is taken, not pending, or does not fit this worker. */
export async function claimOne(db: Db, settings: PlacementSettings, workerId: string, jobId: number, leaseTtlMs: number): Promise<JobRow> {
  const [row] = await claimJobs(db, settings, workerId, { max: 1, leaseTtlMs, jobId });
  if (row) return row;
  const job = await db.selectFrom('jobs').select(['state']).where('id', '=', jobId).executeTakeFirst();
  if (!job) throw notFound(`job ${jobId}`);
  throw new HttpError(409, 'not_claimable', `job ${jobId} is ${job.state === 'pending' ? 'taken, not due, or does not fit this worker' : job.state}`);
}

/** The poll: pending jobs this worker could claim now, in claim order, without taking them. */
export async function availableJobs(db: Db, settings: PlacementSettings, workerId: string, limit: number): Promise<JobRow[]> {
  const w = (await db.selectFrom('workers').selectAll().where('id', '=', workerId).executeTakeFirst()) as WorkerRow | undefined;
  if (!w) throw notFound(`worker ${workerId}`);
  const queues = w.queues.filter((q) => settings.modeFor(q) === 'pull');
  if (queues.length === 0) return [];
  return db.transaction().execute(async (trx) => {
    // A look, not a claim: no row locks, which would hide these jobs from real claims meanwhile.
    const candidates = await selectCandidates(trx, w, queues, limit, undefined, false);
    const ids = choose(settings, w, candidates, Infinity).map((j) => j.id);
    if (ids.length === 0) return [];
    return (await trx.selectFrom('jobs').selectAll().where('id', 'in', ids)
      .orderBy('priority', 'desc').orderBy('run_at').orderBy('id').execute()) as JobRow[];
  });
}
