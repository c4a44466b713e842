// Worker registry: register, heartbeat (with the leases it holds), drain, deregister.
import { sql, type Transaction } from 'kysely';
import type { z } from 'zod';
import type { registerWorkerSchema } from '../../protocol/schemas.js';
import type { WorkerHeartbeatResponse, WorkerView } from '../../protocol/types.js';
import { claimColumns, type ClaimRow, type Database, type Db, type WorkerRow } from '../db.js';
import { allocations } from '../placement/workers.js';
import { shownState, type Allocation } from '../placement/rows.js';
import { leaseClock, markLeases } from './lease-age.js';
import { reapWorkerLeases, type ReapedJob } from './reaper.js';
import { HttpError, notFound } from '../errors.js';

type Registration = z.output<typeof registerWorkerSchema>;

export async function registerWorker(db: Db, w: Registration, keySha256: string): Promise<WorkerRow> {
  return (await db
    .insertInto('workers')
    .values({
      name: w.name,
      hostname: w.hostname ?? null,
      region: w.region ?? null,
      labels: JSON.stringify(w.labels),
      cpu: w.capacity.cpu,
      memory_mb: w.capacity.memoryMb,
      disk_mb: w.capacity.diskMb,
      slots: w.capacity.slots,
      queues: w.queues,
      version: w.version ?? null,
      key_sha256: keySha256,
    })
    .returningAll()
    .executeTakeFirstOrThrow()) as WorkerRow;
}

export interface Heartbeat {
  workerId: string;
  leases: { jobId: number; leaseToken: string }[];
}

/**
 * Marks workers alive and extends every lease each still holds, for many workers in one
 * statement. Leases a worker names but no longer holds come back as `lost`, so it stops acting
 * on those jobs. A worker the server does not know gets null; a deregistered one, its
 * deregistered answer.
 */
export async function workerHeartbeats(
  db: Db,
  beats: Heartbeat[],
  leaseTtlMs: number,
): Promise<(WorkerHeartbeatResponse | null)[]> {
  // In job id order, the order the rows are locked in (see releaseArgs).
  const leases = beats
    .flatMap((b) => b.leases.map((l) => ({ ...l, workerId: b.workerId })))
    .sort((a, b) => a.jobId - b.jobId);
  const rows = (
    await sql<{ kind: 'worker' | 'lease'; id: string; info: string; cancel: boolean | null }>`
    WITH w AS (
      -- A silent worker marked gone is back (still draining if it was asked to); a deregistered
      -- one stays out, unseen.
      UPDATE workers SET last_seen_at = CASE WHEN state = 'deregistered' THEN last_seen_at ELSE now() END,
        state = CASE WHEN state <> 'gone' THEN state WHEN drain_asked THEN 'draining' ELSE 'active' END
      WHERE id = ANY(${beats.map((b) => b.workerId)}::uuid[]) RETURNING id, state
    ), l AS (
      UPDATE jobs j SET lease_expires_at = now() + ${leaseTtlMs} * interval '1 millisecond'
      FROM unnest(${leases.map((l) => l.jobId)}::bigint[], ${leases.map((l) => l.leaseToken)}::uuid[], ${leases.map((l) => l.workerId)}::uuid[])
        AS l(id, token, worker_id)
      WHERE j.id = l.id AND j.lease_token = l.token AND j.state = 'running' AND j.worker_id = l.worker_id
      RETURNING j.id, j.worker_id, j.cancel_requested
    )
    SELECT 'worker' AS kind, id::text AS id, state AS info, NULL::boolean AS cancel FROM w
    UNION ALL
    SELECT 'lease', id::text, worker_id::text, cancel_requested FROM l`.execute(db)
  ).rows;
  const states = new Map(rows.filter((r) => r.kind === 'worker').map((r) => [r.id, r.info]));
  // Keyed by worker too: in one batch, another worker's live lease is not this worker's.
  const held = new Map(rows.filter((r) => r.kind === 'lease').map((r) => [`${r.info}:${r.id}`, r.cancel === true]));
  return beats.map((b) => {
    const state = states.get(b.workerId);
    if (state === undefined) return null;
    if (state === 'deregistered') return deregisteredAnswer(b.leases);
    return {
      cancel: b.leases.filter((l) => held.get(`${b.workerId}:${l.jobId}`) === true).map((l) => l.jobId),
      lost: b.leases.filter((l) => !held.has(`${b.workerId}:${l.jobId}`)).map((l) => l.jobId),
      drain: state === 'draining',
    };
  });
}

/**
 * For a heartbeat woken while it waited: the worker's running jobs with a cancel requested (those
 * it claimed after the heartbeat began included), whether it is to drain, and whether it was
 * deregistered meanwhile.
 */
export async function cancelsAndDrain(
  db: Db,
  workerId: string,
): Promise<{ cancel: number[]; drain: boolean; deregistered: boolean }> {
  const rows = (
    await sql<{ id: number | null; state: string }>`
    SELECT j.id, w.state FROM workers w
    LEFT JOIN jobs j ON j.worker_id = w.id AND j.state = 'running' AND j.cancel_requested
    WHERE w.id = ${workerId}`.execute(db)
  ).rows;
  const state = rows[0]?.state;
  return {
    cancel: rows.flatMap((r) => (r.id === null ? [] : [r.id])),
    drain: state === 'draining',
    deregistered: state === 'deregistered',
  };
}

/**
 * What a deregistered worker's heartbeat is told, in words every worker version acts on: each
 * lease it names is lost (it stops those jobs), and it is to drain (it stops).
 */
export const deregisteredAnswer = (leases: { jobId: number }[]): WorkerHeartbeatResponse => ({
  cancel: [],
  lost: leases.map((l) => l.jobId),
  drain: true,
  deregistered: true,
});

/** Deregistration is final: a deregistered worker is not set draining again (409). */
export async function setWorkerState(
  db: Db | Transaction<Database>,
  workerId: string,
  state: 'draining' | 'deregistered',
): Promise<WorkerRow> {
  let q = db
    .updateTable('workers')
    .set(state === 'draining' ? { state, drain_asked: true } : { state })
    .where('id', '=', workerId);
  if (state === 'draining') q = q.where('state', '!=', 'deregistered');
  const row = await q.returningAll().executeTakeFirst();
  if (!row) {
    await getWorker(db, workerId); // 404 if there is no such worker
    throw new HttpError(409, 'worker_deregistered', `worker ${workerId} was deregistered; it cannot drain`);
  }
  // Wakes the worker's held heartbeat and its long-poll, on whichever server they wait.
  await sql`SELECT pg_notify('skipjack_drain', ${workerId})`.execute(db);
  return row as WorkerRow;
}

/** Ends the worker's waiting long-poll, on whichever server it waits: it answers with what it has. */
export async function endLongPoll(db: Db, workerId: string): Promise<void> {
  await sql`SELECT pg_notify('skipjack_end_poll', ${workerId})`.execute(db);
}

/**
 * Deregistration is final: every lease the worker holds is taken back now, as the reaper takes
 * back an expired one (a lost run), and its heartbeats are told to stop from now on. In one
 * transaction, so that no claim of the worker's slips in between.
 */
export async function deregisterWorker(db: Db, workerId: string): Promise<{ worker: WorkerRow; reaped: ReapedJob[] }> {
  return db.transaction().execute(async (trx) => {
    const worker = await setWorkerState(trx, workerId, 'deregistered');
    return { worker, reaped: await reapWorkerLeases(trx, workerId) };
  });
}

export async function getWorker(db: Db | Transaction<Database>, workerId: string): Promise<WorkerRow> {
  const row = await db.selectFrom('workers').selectAll().where('id', '=', workerId).executeTakeFirst();
  if (!row) throw notFound(`worker ${workerId}`);
  return row as WorkerRow;
}

/**
 * The jobs a worker holds a lease on, as a claim answers with them. Each lease's age is the
 * database's (its clock against the lease's expiry), marked as a claim's is (lease-age.ts).
 */
export async function heldJobs(db: Db, workerId: string, leaseTtlMs: number): Promise<ClaimRow[]> {
  const before = leaseClock();
  const rows = (await db
    .selectFrom('jobs')
    .select(claimColumns)
    .select(
      sql<number>`${leaseTtlMs}::float8 - extract(epoch FROM lease_expires_at - clock_timestamp()) * 1000`.as('age_ms'),
    )
    .where('worker_id', '=', workerId)
    .where('state', '=', 'running')
    .orderBy('id')
    .execute()) as (ClaimRow & { age_ms: number })[];
  return rows.map(({ age_ms, ...row }) => markLeases([row], before - Math.max(0, Number(age_ms)))[0]);
}

export async function listWorkers(db: Db, unresponsiveMs: number, includeGone = false): Promise<WorkerView[]> {
  let q = db.selectFrom('workers').selectAll().orderBy('registered_at');
  if (!includeGone) q = q.where('state', 'not in', ['gone', 'deregistered']);
  const rows = (await q.execute()) as WorkerRow[];
  const alloc = await allocations(
    db,
    rows.map((r) => r.id),
  );
  return rows.map((r) => toWorkerView(r, alloc.get(r.id), unresponsiveMs));
}

export function toWorkerView(r: WorkerRow, alloc?: Allocation, unresponsiveMs?: number): WorkerView {
  return {
    id: r.id,
    name: r.name,
    hostname: r.hostname,
    region: r.region,
    labels: r.labels,
    capacity: { cpu: r.cpu, memoryMb: r.memory_mb, diskMb: r.disk_mb, slots: r.slots },
    allocated: alloc ?? { cpu: 0, memoryMb: 0, diskMb: 0, slots: 0 },
    queues: r.queues,
    state: shownState(r, unresponsiveMs),
    lastSeenAt: new Date(r.last_seen_at).toISOString(),
    registeredAt: new Date(r.registered_at).toISOString(),
  };
}
