// Pull-mode claims: a worker takes pending jobs it may run, up to its free capacity.
import { sql, type Transaction } from 'kysely';
import type { Database, Db, JobRow, WorkerRow } from '../db.js';
import { notFound, HttpError } from '../errors.js';

export interface ClaimOptions {
  max: number;
  leaseTtlMs: number;
  /** Claim this job only (the single-job claim endpoint). */
  jobId?: number;
}

type Candidate = Pick<JobRow, 'id' | 'need_cpu' | 'need_memory_mb' | 'need_disk_mb'> & {
  alloc_cpu: number; alloc_memory_mb: number; alloc_disk_mb: number; alloc_slots: number;
};

/**
 * Claims in one transaction: lock the worker row (so two claims by one worker cannot both
 * spend its free capacity), select fitting jobs with FOR UPDATE SKIP LOCKED (so claimers never
 * wait on each other), then take a prefix that fits cumulatively and start their leases.
 */
export async function claimJobs(db: Db, workerId: string, opts: ClaimOptions): Promise<JobRow[]> {
  return db.transaction().execute(async (trx) => {
    const worker = await lockWorker(trx, workerId);
    if (worker.state !== 'active') return [];
    const candidates = await selectCandidates(trx, worker, opts);
    const chosen = fitCumulatively(candidates, worker, opts.max);
    if (chosen.length === 0) return [];
    return startLeases(trx, worker.id, chosen, opts.leaseTtlMs);
  });
}

async function lockWorker(trx: Transaction<Database>, workerId: string): Promise<WorkerRow> {
  const row = (await sql<WorkerRow>`
    UPDATE workers SET last_seen_at = now() WHERE id = ${workerId} RETURNING *`.execute(trx)).rows[0];
  if (!row) throw notFound(`worker ${workerId}`);
  return row;
}

// Region, resources and labels are checked here, in SQL, so unsuitable jobs are skipped by the
// database instead of being fetched; the statement runs after the worker lock, so it sees every
// claim committed before ours.
async function selectCandidates(trx: Transaction<Database>, w: WorkerRow, opts: ClaimOptions): Promise<Candidate[]> {
  const labels = JSON.stringify(w.labels);
  const onlyJob = opts.jobId === undefined ? sql`` : sql`AND j.id = ${opts.jobId}`;
  return (await sql<Candidate>`
    WITH alloc AS (
      SELECT coalesce(sum(need_cpu), 0)::int AS cpu, coalesce(sum(need_memory_mb), 0)::int AS memory_mb,
             coalesce(sum(need_disk_mb), 0)::int AS disk_mb, count(*)::int AS slots
      FROM jobs WHERE worker_id = ${w.id} AND state IN ('running', 'assigned')
    )
    SELECT j.id, j.need_cpu, j.need_memory_mb, j.need_disk_mb,
           alloc.cpu AS alloc_cpu, alloc.memory_mb AS alloc_memory_mb, alloc.disk_mb AS alloc_disk_mb, alloc.slots AS alloc_slots
    FROM jobs j, alloc
    WHERE j.state = 'pending' AND j.queue = ANY(${w.queues}::text[]) AND j.run_at <= now() ${onlyJob}
      AND alloc.slots < ${w.slots}
      AND (j.regions IS NULL OR ${w.region}::text = ANY(j.regions))
      AND j.need_cpu <= ${w.cpu} - alloc.cpu
      AND j.need_memory_mb <= ${w.memory_mb} - alloc.memory_mb
      AND j.need_disk_mb <= ${w.disk_mb} - alloc.disk_mb
      AND (j.label_selector IS NULL OR NOT EXISTS (
        SELECT 1 FROM jsonb_each(j.label_selector) AS s(k, v)
        WHERE NOT coalesce(v ? (${labels}::jsonb ->> s.k), false)))
    ORDER BY j.priority DESC, j.run_at, j.id
    LIMIT ${opts.max}
    FOR UPDATE OF j SKIP LOCKED`.execute(trx)).rows;
}

/** Takes candidates in claim order while the running total still fits the worker. */
export function fitCumulatively(candidates: Candidate[], w: WorkerRow, max: number): Candidate[] {
  if (candidates.length === 0) return [];
  const first = candidates[0];
  const free = {
    cpu: w.cpu - first.alloc_cpu,
    mem: w.memory_mb - first.alloc_memory_mb,
    disk: w.disk_mb - first.alloc_disk_mb,
    slots: w.slots - first.alloc_slots,
  };
  const chosen: Candidate[] = [];
  for (const c of candidates) {
    if (chosen.length >= Math.min(max, free.slots)) break;
    if (c.need_cpu > free.cpu || c.need_memory_mb > free.mem || c.need_disk_mb > free.disk) continue;
    free.cpu -= c.need_cpu;
    free.mem -= c.need_memory_mb;
    free.disk -= c.need_disk_mb;
    chosen.push(c);
  }
  return chosen;
}

async function startLeases(trx: Transaction<Database>, workerId: string, chosen: Candidate[], ttlMs: number) {
  return (await sql<JobRow>`
    WITH claimed AS (
      UPDATE jobs SET state = 'running', worker_id = ${workerId}, lease_token = gen_random_uuid(),
        lease_expires_at = now() + ${ttlMs} * interval '1 millisecond', attempts = attempts + 1, runs = runs + 1,
        started_at = now(), waiting_reason = NULL, exit_code = NULL, signal = NULL, end_reason = NULL, error = NULL
      WHERE id = ANY(${chosen.map((c) => c.id)}::bigint[])
      RETURNING *
    ), recorded AS (
      INSERT INTO job_attempts (job_id, attempt, worker_id) SELECT id, runs, worker_id FROM claimed
    )
    SELECT * FROM claimed ORDER BY priority DESC, run_at, id`.execute(trx)).rows;
}

/** The single-job claim: 409 when the job is taken, not pending, or does not fit this worker. */
export async function claimOne(db: Db, workerId: string, jobId: number, leaseTtlMs: number): Promise<JobRow> {
  const [row] = await claimJobs(db, workerId, { max: 1, leaseTtlMs, jobId });
  if (row) return row;
  const job = await db.selectFrom('jobs').select(['state']).where('id', '=', jobId).executeTakeFirst();
  if (!job) throw notFound(`job ${jobId}`);
  throw new HttpError(409, 'not_claimable', `job ${jobId} is ${job.state === 'pending' ? 'taken, not due, or does not fit this worker' : job.state}`);
}

/** The poll: pending jobs this worker could claim now, in claim order, without taking them. */
export async function availableJobs(db: Db, workerId: string, limit: number): Promise<JobRow[]> {
  const w = (await db.selectFrom('workers').selectAll().where('id', '=', workerId).executeTakeFirst()) as WorkerRow | undefined;
  if (!w) throw notFound(`worker ${workerId}`);
  return db.transaction().execute(async (trx) => {
    const ids = (await selectCandidates(trx, w, { max: limit, leaseTtlMs: 0 })).map((c) => c.id);
    if (ids.length === 0) return [];
    return (await trx.selectFrom('jobs').selectAll().where('id', 'in', ids)
      .orderBy('priority', 'desc').orderBy('run_at').orderBy('id').execute()) as JobRow[];
  });
}
