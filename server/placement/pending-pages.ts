// The central scheduler's read of pending jobs: pages in claim order by keyset, so a pass can
// look past a head of jobs that fit nowhere without sorting from the top again for each page.
import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../db.js';
import type { PlacementJobRow } from './rows.js';

/** A position in claim order (priority DESC, run_at, id); run_at as PostgreSQL's text, exact to the microsecond. */
export interface PendingKey {
  priority: number;
  runAt: string;
  id: number;
}

export type PendingRow = PlacementJobRow & { run_at_key: string; waiting_reason: string | null };

export const keyOf = (r: PendingRow): PendingKey => ({ priority: r.priority, runAt: r.run_at_key, id: r.id });

function after(k: PendingKey | undefined): RawBuilder<unknown> {
  if (!k) return sql`true`;
  return sql`(priority < ${k.priority} OR (priority = ${k.priority} AND (run_at, id) > (${k.runAt}::timestamptz, ${k.id}::bigint)))`;
}

/**
 * Up to `limit` due pending jobs of the central queues, after both keys. Not locked: locking
 * every row read wrote 280 kB of WAL per pass over a backlog of unfit jobs; the pass locks only
 * the rows it writes (recordSchedule).
 */
export async function pendingPage(
  db: Db,
  queues: RawBuilder<unknown>,
  limit: number,
  afterKeys: (PendingKey | undefined)[],
): Promise<PendingRow[]> {
  const conditions = afterKeys.filter(Boolean).map(after);
  const keyset = conditions.length ? sql.join(conditions, sql` AND `) : sql`true`;
  return (
    await sql<PendingRow>`
    SELECT id, queue, priority, created_at, constraints, preferences, waiting_reason, run_at::text AS run_at_key FROM jobs
    WHERE state = 'pending' AND run_at <= now() AND ${queues} AND ${keyset}
    ORDER BY priority DESC, run_at, id LIMIT ${limit}`.execute(db)
  ).rows;
}
