// Claims: a worker takes the jobs assigned to it (central mode) and pending jobs it may run
// (pull mode), up to its free capacity. The candidate query, the lease start, the whole
// one-statement claim and the release-then-claim are SQL functions (server/sql/); the hand-off of
// a new job to a sleeping worker is in hand-off.ts.
import { sql, type Transaction } from 'kysely';
import { firstFailure, rankJobsForWorker, type PlacementJob } from '../../placement/index.js';
import type { ClaimRow, Database, Db, JobRow, WorkerRow } from '../db.js';
import { notFound, HttpError, unknownWorker } from '../errors.js';
import { toPlacementJob, toPlacementWorker, type Allocation } from '../placement/rows.js';
import { hasCentralQueues, type PlacementSettings } from '../placement/settings.js';
import { releaseArgs, type ReleasedRun, type ReleaseRequest } from './leases.js';

export interface ClaimOptions {
  max: number;
  leaseTtlMs: number;
  /** Claim this job only (the single-job claim endpoint). */
  jobId?: number;
}

type Executor = Db | Transaction<Database>;

/**
 * When every filter runs in SQL and no queue is central, a claim is one statement, skipjack_claim.
 * Otherwise it is a transaction: lock the worker row (so two claims by one worker cannot both spend
 * its free capacity), start what central mode assigned to it, select pending jobs that fit with
 * FOR UPDATE SKIP LOCKED (so claimers never wait on each other), let every filter of the queue
 * (plugins included) and the capacity fit pick among them, and start their leases.
 */
export async function claimJobs(
  db: Db,
  settings: PlacementSettings,
  workerId: string,
  opts: ClaimOptions,
): Promise<Claimed> {
  if (opts.jobId === undefined && claimsInOneStatement(settings))
    return { jobs: await claimInOneStatement(db, workerId, opts), contended: false };
  const claimed = await claimInTransaction(db, settings, workerId, opts);
  return { jobs: claimed.jobs.sort(inClaimOrder), contended: claimed.contended };
}

export interface Claimed {
  jobs: ClaimRow[];
  /**
   * Nothing taken, while jobs that could be were locked by other claims. Those may leave them, and
   * rows a claim locked and left free up without a NOTIFY: this claimer should look again soon.
   * (The one-statement claim takes whatever it locks, so it never leaves rows for others to miss.)
   */
  contended: boolean;
}

export const claimsInOneStatement = (settings: PlacementSettings) =>
  settings.filtersInSql && !hasCentralQueues(settings);

export interface ReleaseAndClaim {
  released: Map<number, ReleasedRun>;
  claimed: ClaimRow[];
  workerKnown: boolean;
}

/**
 * A worker's finished runs, then its claim, in one statement and one commit (where claims are one
 * statement): a worker running short jobs does this for every few jobs it runs.
 */
export async function releaseAndClaim(
  db: Db,
  workerId: string,
  releases: ReleaseRequest[],
  opts: ClaimOptions,
): Promise<ReleaseAndClaim> {
  const rows = (
    await sql<ClaimRow & ReleasedRun & { kind: 'released' | 'claimed' | 'no_worker' }>`
    SELECT * FROM skipjack_release_and_claim(${releaseArgs(releases)}, ${workerId}, ${opts.max}, ${opts.leaseTtlMs})`.execute(
      db,
    )
  ).rows;
  const out: ReleaseAndClaim = { released: new Map(), claimed: [], workerKnown: true };
  for (const r of rows) {
    if (r.kind === 'released') out.released.set(r.id, r);
    else if (r.kind === 'claimed') out.claimed.push(r);
    else out.workerKnown = false;
  }
  return out;
}

/** Priority first, then due time, then age: the order of the pending index. */
function inClaimOrder(a: JobRow, b: JobRow): number {
  return b.priority - a.priority || a.run_at.getTime() - b.run_at.getTime() || a.id - b.id;
}

async function claimInTransaction(
  db: Db,
  settings: PlacementSettings,
  workerId: string,
  opts: ClaimOptions,
): Promise<{ jobs: JobRow[]; contended: boolean }> {
  return db.transaction().execute(async (trx) => {
    const taken = (jobs: JobRow[]) => ({ jobs, contended: false });
    const worker = await lockWorker(trx, workerId);
    if (worker.state !== 'active') return taken([]);
    const assigned =
      opts.jobId === undefined && hasCentralQueues(settings)
        ? await startAssigned(trx, worker.id, opts.max, opts.leaseTtlMs)
        : [];
    const max = opts.max - assigned.length;
    const queues = worker.queues.filter((q) => settings.modeFor(q) === 'pull');
    if (max <= 0 || queues.length === 0) return taken(assigned);
    const load = await workerLoad(trx, worker.id);
    const candidates = await selectCandidates(trx, worker, load, queues, max, true, opts.jobId);
    const chosen = choose(settings, worker, load, candidates, max);
    // Rows we locked but leave behind free up at commit without a NOTIFY of their own; without
    // one, claimers that skipped them as locked would sleep as if nothing were there. Only a claim
    // that took something says so: one that took nothing would wake itself again, forever. A
    // claimer that took nothing finds out for itself that it skipped rows (`contended`).
    if (chosen.length > 0 && candidates.length > chosen.length)
      await sql`SELECT pg_notify('skipjack_jobs', '')`.execute(trx);
    if (chosen.length === 0) {
      const contended =
        assigned.length === 0 &&
        opts.jobId === undefined &&
        (await skippedLocked(trx, worker, load, queues, max, candidates));
      return { jobs: assigned, contended };
    }
    return taken([
      ...assigned,
      ...(await startLeases(
        trx,
        worker.id,
        chosen.map((c) => c.id),
        opts.leaseTtlMs,
      )),
    ]);
  });
}

/** The same look without SKIP LOCKED finds a job the locking one passed over: another claim holds it. */
async function skippedLocked(
  trx: Transaction<Database>,
  w: WorkerRow,
  load: Allocation,
  queues: string[],
  max: number,
  locked: JobRow[],
): Promise<boolean> {
  const seen = new Set(locked.map((c) => c.id));
  return (await selectCandidates(trx, w, load, queues, max, false)).some((c) => !seen.has(c.id));
}

async function claimInOneStatement(db: Db, workerId: string, opts: ClaimOptions): Promise<ClaimRow[]> {
  try {
    return (await sql<ClaimRow>`SELECT * FROM skipjack_claim(${workerId}, ${opts.max}, ${opts.leaseTtlMs})`.execute(db))
      .rows;
  } catch (err) {
    if ((err as { code?: string }).code === 'P0002') throw unknownWorker(workerId);
    throw err;
  }
}

// A row lock, not an update: liveness comes from heartbeats, and a claim need not write the row.
// NO KEY: the weakest row lock that still serializes one worker's claims.
async function lockWorker(trx: Transaction<Database>, workerId: string): Promise<WorkerRow> {
  const row = (
    await sql<WorkerRow>`
    SELECT * FROM workers WHERE id = ${workerId} FOR NO KEY UPDATE`.execute(trx)
  ).rows[0];
  if (!row) throw unknownWorker(workerId);
  return row;
}

/** Runs after the worker lock, so it sees every claim before ours. */
async function workerLoad(db: Executor, workerId: string): Promise<Allocation> {
  const row = (
    await sql<{ cpu: number; memory_mb: number; disk_mb: number; slots: number }>`
    SELECT * FROM skipjack_worker_load(${workerId})`.execute(db)
  ).rows[0];
  return { cpu: row.cpu, memoryMb: row.memory_mb, diskMb: row.disk_mb, slots: row.slots };
}

/** Region, resources and labels are checked in SQL (skipjack_candidates); `lock` takes the rows. */
async function selectCandidates(
  db: Executor,
  w: WorkerRow,
  load: Allocation,
  queues: string[],
  max: number,
  lock: boolean,
  jobId?: number,
): Promise<JobRow[]> {
  return (
    await sql<JobRow>`
    SELECT c.* FROM workers w, skipjack_candidates(w, ${queues}::text[], ${Math.min(max, w.slots - load.slots)}::int,
      ${w.cpu - load.cpu}::int, ${w.memory_mb - load.memoryMb}::int, ${w.disk_mb - load.diskMb}::int, ${lock}, ${jobId ?? null}::bigint) AS c
    WHERE w.id = ${w.id}`.execute(db)
  ).rows;
}

/** Every filter of the job's queue (plugins included), then the cumulative capacity fit. */
function choose(
  settings: PlacementSettings,
  w: WorkerRow,
  load: Allocation,
  candidates: JobRow[],
  max: number,
): PlacementJob[] {
  if (candidates.length === 0) return [];
  const worker = toPlacementWorker(w, load);
  const ctx = { now: Date.now() };
  const eligible = candidates
    .map(toPlacementJob)
    .filter((job) => firstFailure(job, worker, settings.configFor(job.queue).filters, ctx) === null);
  return rankJobsForWorker(eligible, worker, { filters: [], ctx, max }).claim;
}

async function startLeases(trx: Transaction<Database>, workerId: string, ids: number[], ttlMs: number) {
  return (await sql<JobRow>`SELECT * FROM skipjack_start_leases(${workerId}, ${ids}::bigint[], ${ttlMs})`.execute(trx))
    .rows;
}

/** Central mode: the jobs the scheduler reserved on this worker start now. */
async function startAssigned(trx: Transaction<Database>, workerId: string, max: number, ttlMs: number) {
  return (
    await sql<JobRow>`
    SELECT * FROM skipjack_start_leases(${workerId}, ARRAY(
      SELECT id FROM jobs WHERE worker_id = ${workerId} AND state = 'assigned' ORDER BY assigned_at, id LIMIT ${max}), ${ttlMs})`.execute(
      trx,
    )
  ).rows;
}

/** The single-job claim: 409 when the job is taken, not pending, or does not fit this worker. */
export async function claimOne(
  db: Db,
  settings: PlacementSettings,
  workerId: string,
  jobId: number,
  leaseTtlMs: number,
): Promise<ClaimRow> {
  const [row] = (await claimJobs(db, settings, workerId, { max: 1, leaseTtlMs, jobId })).jobs;
  if (row) return row;
  const job = await db.selectFrom('jobs').select(['state']).where('id', '=', jobId).executeTakeFirst();
  if (!job) throw notFound(`job ${jobId}`);
  throw new HttpError(
    409,
    'not_claimable',
    `job ${jobId} is ${job.state === 'pending' ? 'taken, not due, or does not fit this worker' : job.state}`,
  );
}

/** The poll: pending jobs this worker could claim now, in claim order, without taking them. */
export async function availableJobs(
  db: Db,
  settings: PlacementSettings,
  workerId: string,
  limit: number,
): Promise<JobRow[]> {
  const w = (await db.selectFrom('workers').selectAll().where('id', '=', workerId).executeTakeFirst()) as
    WorkerRow | undefined;
  if (!w) throw unknownWorker(workerId);
  const queues = w.queues.filter((q) => settings.modeFor(q) === 'pull');
  if (queues.length === 0) return [];
  // A look, not a claim: no row locks, which would hide these jobs from real claims meanwhile.
  const load = await workerLoad(db, w.id);
  const candidates = await selectCandidates(db, w, load, queues, limit, false);
  const ids = new Set(choose(settings, w, load, candidates, Infinity).map((j) => j.id));
  return candidates.filter((c) => ids.has(c.id)).slice(0, limit);
}
