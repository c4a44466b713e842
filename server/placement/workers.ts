// The workers placement reasons about, with what their held jobs use.
import { sql } from 'kysely';
import type { PlacementWorker } from '../../placement/index.js';
import type { Db, WorkerRow } from '../db.js';
import { allocations } from '../store/workers.js';
import { toPlacementWorker } from './rows.js';

/** Workers heard from within `windowMs`: live ones, and ones that may be restarting. */
export async function workersSeenWithin(db: Db, windowMs: number): Promise<PlacementWorker[]> {
  const rows = (await sql<WorkerRow>`
    SELECT * FROM workers WHERE last_seen_at > now() - ${windowMs} * interval '1 millisecond'
    ORDER BY id`.execute(db)).rows;
  const alloc = await allocations(db, rows.map((r) => r.id));
  return rows.map((r) => toPlacementWorker(r, alloc.get(r.id)));
}

/** Workers that can take work now: active and not silent past `goneAfterMs`. */
export async function liveWorkers(db: Db, goneAfterMs: number): Promise<PlacementWorker[]> {
  const seen = await workersSeenWithin(db, goneAfterMs);
  return seen.filter((w) => w.state === 'active');
}
