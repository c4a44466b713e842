// Capacity arithmetic shared by the resources filter, the rankers and pull-mode batching.
import type { Capacity, PlacementJob, PlacementWorker } from './types.js';

export const RESOURCE_NAMES = ['cpu', 'memoryMb', 'diskMb'] as const;
export type ResourceName = (typeof RESOURCE_NAMES)[number];

/** How each resource is named in reasons. */
export const RESOURCE_LABELS: Record<ResourceName, string> = { cpu: 'cpu', memoryMb: 'memory', diskMb: 'disk' };

const CAPACITY_KEYS = [...RESOURCE_NAMES, 'slots'] as const;
const NOTHING: Capacity = { cpu: 0, memoryMb: 0, diskMb: 0, slots: 0 };

function combine(a: Capacity, b: Capacity, sign: 1 | -1): Capacity {
  const out = { ...NOTHING };
  for (const key of CAPACITY_KEYS) out[key] = a[key] + sign * b[key];
  return out;
}

/** What one job takes from a worker: its requested resources (0 when unset) and one slot. */
export function jobRequest(job: PlacementJob): Capacity {
  const r = job.constraints.resources ?? {};
  return { cpu: r.cpu ?? 0, memoryMb: r.memoryMb ?? 0, diskMb: r.diskMb ?? 0, slots: 1 };
}

export function freeCapacity(worker: PlacementWorker): Capacity {
  return combine(worker.capacity, worker.allocated, -1);
}

/** The worker as it would be after taking the job: central mode reserves this way, pull mode batches. */
export function allocate(worker: PlacementWorker, job: PlacementJob): PlacementWorker {
  return { ...worker, allocated: combine(worker.allocated, jobRequest(job), 1) };
}

/** The worker with nothing running and open for work: the best it could ever offer. */
export function idleWorker(worker: PlacementWorker): PlacementWorker {
  return { ...worker, state: 'active', allocated: { ...NOTHING } };
}
