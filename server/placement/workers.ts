// The workers placement reasons about, with what their held jobs use.
import { sql } from 'kysely';
import type { PlacementWorker } from '../../placement/index.js';
import type { Db, WorkerRow } from '../db.js';
import { toPlacementWorker, type Allocation } from './rows.js';

/** What the jobs a worker holds use; capacity accounting derives from jobs, never from a counter. */
export async function allocations(db: Db, workerIds: string[]): Promise<Map<string, Allocation>> {
  if (workerIds.length === 0) return new Map();
  const rows = (
    await sql<{ worker_id: string; cpu: number; memory_mb: number; disk_mb: number; slots: number }>`
    SELECT worker_id, sum(need_cpu)::int AS cpu, sum(need_memory_mb)::int AS memory_mb,
           sum(need_disk_mb)::int AS disk_mb, count(*)::int AS slots
    FROM jobs WHERE worker_id = ANY(${workerIds}::uuid[]) AND state IN ('running', 'assigned')
    GROUP BY worker_id`.execute(db)
  ).rows;
  return new Map(
    rows.map((r) => [r.worker_id, { cpu: r.cpu, memoryMb: r.memory_mb, diskMb: r.disk_mb, slots: r.slots }]),
  );
}

/** Workers heard from within `windowMs`: live ones, and ones that may be restarting (unresponsive past `unresponsiveMs`). */
export async function workersSeenWithin(db: Db, windowMs: number, unresponsiveMs?: number): Promise<PlacementWorker[]> {
  const rows = (
    await sql<WorkerRow>`
    SELECT * FROM workers WHERE last_seen_at > now() - ${windowMs} * interval '1 millisecond'
    ORDER BY id`.execute(db)
  ).rows;
  const alloc = await allocations(
    db,
    rows.map((r) => r.id),
  );
  return rows.map((r) => toPlacementWorker(r, alloc.get(r.id), unresponsiveMs));
}

/**
 * The workers seen within the window, as they would be idle, cached for a moment: every enqueue
 * asks, and a second-old answer is as good as a fresh one for "could anything ever run this".
 */
export class KnownWorkers {
  private cached: { at: number; workers: Promise<PlacementWorker[]> } | null = null;

  constructor(
    private db: Db,
    private windowMs: number,
    private maxAgeMs = 1000,
  ) {}

  get(): Promise<PlacementWorker[]> {
    if (!this.cached || Date.now() - this.cached.at > this.maxAgeMs) {
      const workers = this.load();
      this.cached = { at: Date.now(), workers };
      workers.catch(() => (this.cached = null));
    }
    return this.cached.workers;
  }

  /** A worker registered through this server counts at once. */
  invalidate(): void {
    this.cached = null;
  }

  private async load(): Promise<PlacementWorker[]> {
    const rows = (
      await sql<WorkerRow>`
      SELECT * FROM workers WHERE last_seen_at > now() - ${this.windowMs} * interval '1 millisecond' AND state <> 'deregistered'`.execute(
        this.db,
      )
    ).rows;
    return rows.map((r) => toPlacementWorker(r));
  }
}

/** Workers that can take work now: active and not silent past `goneAfterMs`. */
export async function liveWorkers(db: Db, goneAfterMs: number): Promise<PlacementWorker[]> {
  const seen = await workersSeenWithin(db, goneAfterMs);
  return seen.filter((w) => w.state === 'active');
}

/** The workers `why` reasons about: the live ones, those gone silent among them marked unresponsive (they fit nothing). */
export async function workersToExplain(
  db: Db,
  goneAfterMs: number,
  unresponsiveMs: number,
): Promise<PlacementWorker[]> {
  const seen = await workersSeenWithin(db, goneAfterMs, unresponsiveMs);
  return seen.filter((w) => w.state === 'active' || w.state === 'unresponsive');
}
