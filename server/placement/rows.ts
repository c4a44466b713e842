// Database rows as the placement plugins see them.
import type {
  PlacementJob,
  PlacementWorker,
  LabelPreference,
  JobConstraints,
  WorkerState,
} from '../../placement/index.js';
import type { JobRow, WorkerRow } from '../db.js';

/** What the jobs a worker holds (running or assigned) use: its `allocated` capacity. */
export interface Allocation {
  cpu: number;
  memoryMb: number;
  diskMb: number;
  slots: number;
}

export type PlacementJobRow = Pick<JobRow, 'id' | 'queue' | 'priority' | 'created_at' | 'constraints' | 'preferences'>;

export function toPlacementJob(row: PlacementJobRow): PlacementJob {
  return {
    id: row.id,
    queue: row.queue,
    priority: row.priority,
    createdAt: new Date(row.created_at).getTime(),
    constraints: (row.constraints ?? {}) as JobConstraints,
    preferences: (row.preferences ?? []) as LabelPreference[],
  };
}

const NONE: Allocation = { cpu: 0, memoryMb: 0, diskMb: 0, slots: 0 };

/**
 * The state to show: an active worker not heard from for `unresponsiveMs` (a couple of missed
 * heartbeats; killed, paused or cut off) is unresponsive, long before the reaper calls it gone.
 */
export function shownState(row: WorkerRow, unresponsiveMs?: number, now = Date.now()): WorkerState {
  const silent = unresponsiveMs !== undefined && now - new Date(row.last_seen_at).getTime() > unresponsiveMs;
  return row.state === 'active' && silent ? 'unresponsive' : row.state;
}

export function toPlacementWorker(
  row: WorkerRow,
  allocated: Allocation = NONE,
  unresponsiveMs?: number,
): PlacementWorker {
  return {
    id: row.id,
    name: row.name,
    region: row.region,
    labels: row.labels,
    state: shownState(row, unresponsiveMs),
    capacity: { cpu: row.cpu, memoryMb: row.memory_mb, diskMb: row.disk_mb, slots: row.slots },
    allocated,
    lastSeenAt: new Date(row.last_seen_at).getTime(),
    queues: row.queues,
  };
}
