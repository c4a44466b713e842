// The hand-off: an enqueue's insert and a sleeping worker's claim in one statement and one commit.
import { sql, type CompiledQuery, type RawBuilder } from 'kysely';
import type { ClaimRow, Db, JobRow } from '../db.js';
import type { ClaimOptions } from './claims.js';
import { insertStatement, type InsertRow } from './jobs.js';
import type { PreparedStatements } from './prepared.js';

/**
 * An enqueue's insert and then a worker's claim, in one statement and one commit: the hand-off of
 * new jobs to a worker whose long-poll sleeps. One job goes in already started for the worker
 * when skipjack_can_start_new says it may (013); otherwise, and for a batch, the claim is
 * skipjack_claim, as for any claim.
 */
export async function insertThenClaim(
  db: Db,
  rows: InsertRow[],
  workerId: string,
  opts: ClaimOptions & { prepared?: PreparedStatements },
): Promise<{ inserted: JobRow[]; claimed: ClaimRow[] }> {
  const statement = compileHandOff(db, rows, workerId, opts);
  const result = opts.prepared ? await opts.prepared.rows(statement) : (await db.executeQuery(statement)).rows;
  const inserted = result.filter((r) => r.id !== null).map(({ handed: _, ...row }) => row as JobRow);
  if (inserted.length === 1 && inserted[0].state === 'running') return { inserted, claimed: inserted };
  const claimed: ClaimRow[] = result[0]?.handed ?? [];
  const byId = new Map(claimed.map((c) => [c.id, c]));
  return {
    inserted: inserted.map((row) =>
      byId.has(row.id) ? asClaimedBy(row, workerId, byId.get(row.id)!, opts.leaseTtlMs) : row,
    ),
    claimed,
  };
}

type HandOffRow = JobRow & { handed: ClaimRow[] };

/** The hand-off statement: one job's starts it at its insert when it can, a batch's claims. */
export function handOffStatement(db: Db, rows: InsertRow[], workerId: unknown, max: unknown, leaseTtlMs: unknown) {
  if (rows.length !== 1)
    return sql<HandOffRow>`WITH ${insertThenClaimCtes(insertStatement(db, rows), workerId, max, leaseTtlMs)}`;
  const row = rows[0];
  const due = 'run_at' in row ? sql`${row.run_at}::timestamptz <= now()` : sql`true`;
  return sql<HandOffRow>`
    WITH can AS (
      SELECT ${due} AND skipjack_can_start_new(${workerId}, ${row.need_cpu}, ${row.need_memory_mb}, ${row.need_disk_mb}) AS start),
    ${insertThenClaimCtes(insertStartedIfItCan(row, workerId, leaseTtlMs), workerId, max, leaseTtlMs, sql`(SELECT start FROM can)`)}`;
}

/**
 * The insert, then skipjack_claim unless `started` (the job went in started). The claim's
 * argument reads the count of inserted rows, so it runs once the insert is done, and it then sees
 * the new jobs (a volatile function sees what its calling statement wrote before it ran).
 */
function insertThenClaimCtes(
  insert: RawBuilder<unknown> | ReturnType<typeof insertStatement>,
  workerId: unknown,
  max: unknown,
  leaseTtlMs: unknown,
  started = sql`false`,
) {
  return sql`
    ins AS (${insert}),
    handed AS (
      SELECT CASE WHEN ${started} THEN '[]'::json ELSE (
        SELECT coalesce(json_agg(to_jsonb(c) - 'ordinality' ORDER BY c.ordinality), '[]')
        FROM skipjack_claim(${workerId}, CASE WHEN i.n >= 0 AND i.marked = 'on' THEN ${max}::int END, ${leaseTtlMs}) WITH ORDINALITY AS c
        -- The worker's row lock first, without waiting: a worker busy with a claim or a heartbeat
        -- of its own lets the enqueue go on alone (its long-poll wakes by NOTIFY as ever).
        WHERE EXISTS (SELECT 1 FROM workers WHERE id = ${workerId} FOR NO KEY UPDATE SKIP LOCKED)) END AS handed
      -- Marked as a hand-off, the insert's trigger announces only the jobs this claim leaves (012).
      FROM (SELECT count(*) AS n, set_config('skipjack.handing_off', 'on', true) AS marked FROM ins) AS i)
    SELECT ins.*, handed.handed FROM handed LEFT JOIN ins ON true`;
}

/** One job's insert, as running on the worker where `can.start`, set as server/sql/claim.sql sets a job it starts. */
function insertStartedIfItCan(row: InsertRow, workerId: unknown, leaseTtlMs: unknown) {
  const columns = (Object.keys(row) as (keyof InsertRow)[]).filter((c) => c !== 'placement_deadline_at');
  const ifStarted = (value: RawBuilder<unknown>, otherwise: RawBuilder<unknown> | unknown = null) =>
    sql`CASE WHEN can.start THEN ${value} ELSE ${otherwise} END`;
  return sql`
    INSERT INTO jobs (${sql.join(columns.map((c) => sql.ref(c)))}, placement_deadline_at, state, worker_id, lease_token, lease_expires_at, started_at, attempts, runs)
    SELECT ${sql.join(columns.map((c) => sql`${row[c]}`))}, ${ifStarted(sql`NULL`, sql`${row.placement_deadline_at}::timestamptz`)},
      ${ifStarted(sql`'running'`, sql`'pending'`)}, ${ifStarted(sql`${workerId}::uuid`)}, ${ifStarted(sql`skipjack_new_lease_token()`)},
      ${ifStarted(sql`now() + ${leaseTtlMs}::int * interval '1 millisecond'`)}, ${ifStarted(sql`now()`)}, ${ifStarted(sql`1`, sql`0`)}, ${ifStarted(sql`1`, sql`0`)}
    FROM can
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING *`;
}

/** Stands in for a value while a statement is compiled, to learn which parameter holds it. */
class Slot {
  constructor(readonly name: string) {}
}

/** One job's hand-off statement by the insert's columns, compiled with a Slot for every value. */
const oneJobHandOffs = new Map<string, CompiledQuery<HandOffRow>>();

/**
 * The hand-off statement compiled. One job's (what a waiting worker waits for) is compiled once
 * per set of columns and given this job's values: compiling it every time took 0.17 ms of the
 * job's way to its worker on an idle VM (bench/ latency).
 */
export function compileHandOff(
  db: Db,
  rows: InsertRow[],
  workerId: string,
  opts: ClaimOptions,
): CompiledQuery<HandOffRow> {
  if (rows.length !== 1) return handOffStatement(db, rows, workerId, opts.max, opts.leaseTtlMs).compile(db);
  const columns = Object.keys(rows[0]);
  const key = columns.join();
  let template = oneJobHandOffs.get(key);
  if (!template) {
    const slots = Object.fromEntries(columns.map((column) => [column, new Slot(column)])) as unknown as InsertRow;
    template = handOffStatement(db, [slots], new Slot(' worker'), new Slot(' max'), new Slot(' ttl')).compile(db);
    oneJobHandOffs.set(key, template);
  }
  const values: Record<string, unknown> = {
    ...rows[0],
    ' worker': workerId,
    ' max': opts.max,
    ' ttl': opts.leaseTtlMs,
  };
  return { ...template, parameters: template.parameters.map((p) => (p instanceof Slot ? values[p.name] : p)) };
}

/**
 * A new row as the claim in its own statement left it (the insert's RETURNING shows it before):
 * what skipjack_claim sets. now() is the transaction's, so the claim started it at created_at.
 */
function asClaimedBy(row: JobRow, workerId: string, claim: ClaimRow, leaseTtlMs: number): JobRow {
  return {
    ...row,
    state: 'running',
    worker_id: workerId,
    lease_token: claim.lease_token,
    lease_expires_at: new Date(row.created_at.getTime() + leaseTtlMs),
    attempts: row.attempts + 1,
    runs: claim.runs,
    started_at: row.created_at,
    placement_deadline_at: null,
  };
}
