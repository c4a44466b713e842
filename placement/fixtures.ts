// Builders for tests and the simulator: a plausible job and worker, overridden field by field.
import type { Capacity, PlacementJob, PlacementWorker } from './types.js';

export function makeJob(overrides: Partial<PlacementJob> = {}): PlacementJob {
  return { id: 1, queue: 'default', priority: 0, createdAt: 0, constraints: {}, preferences: [], ...overrides };
}

export function capacity(overrides: Partial<Capacity> = {}): Capacity {
  return { cpu: 0, memoryMb: 0, diskMb: 0, slots: 0, ...overrides };
}

export function makeWorker(overrides: Partial<PlacementWorker> = {}): PlacementWorker {
  return {
    id: 'w1',
    name: 'worker-1',
    region: 'mad',
    labels: {},
    state: 'active',
    capacity: capacity({ cpu: 4000, memoryMb: 8192, diskMb: 100_000, slots: 4 }),
    allocated: capacity(),
    lastSeenAt: 0,
    ...overrides,
  };
}
