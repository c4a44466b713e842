// What the placement test files register: a worker in a region, 4 cores, 8 GB, 4 slots.
import type { RegisterWorker } from '../../protocol/schemas.js';

export const worker = (name: string, region: string, over: Partial<RegisterWorker> = {}): RegisterWorker => ({
  name,
  region,
  queues: ['default'],
  capacity: { cpu: 4000, memoryMb: 8192, diskMb: 10_000, slots: 4 },
  ...over,
});
