// What a scrape reads from the database: live jobs by queue and state, the oldest due pending
// job's age, each live worker's capacity and allocation. One read at most a second, shared by
// every scrape in that second; the gauges are reset each time, so a queue emptied or a worker
// gone drops its series.
import type { Gauge } from 'prom-client';
import type { Db } from '../db.js';
import { workersSeenWithin } from '../placement/workers.js';
import { liveJobsByQueue } from '../store/metrics.js';
import type { BoundedLabels } from './labels.js';

/** Series for at most this many workers; a fleet larger than that is summed by the other gauges. */
export const MAX_WORKER_SERIES = 1000;
const RESOURCES = ['cpu', 'memoryMb', 'diskMb', 'slots'] as const;

export interface ScrapeGauges {
  jobs: Gauge<'queue' | 'state'>;
  oldestPending: Gauge<'queue'>;
  capacity: Gauge<'worker' | 'name' | 'resource'>;
  allocated: Gauge<'worker' | 'name' | 'resource'>;
}

export class ScrapeReader {
  private last: { at: number; read: Promise<void> } | null = null;

  constructor(
    private readonly db: Db,
    private readonly queues: BoundedLabels,
    private readonly gauges: ScrapeGauges,
    private readonly workerWindowMs: number,
    private readonly maxAgeMs = 1000,
  ) {}

  read(): Promise<void> {
    if (!this.last || Date.now() - this.last.at > this.maxAgeMs) {
      const read = this.load();
      this.last = { at: Date.now(), read };
      read.catch(() => (this.last = null));
    }
    return this.last.read;
  }

  private async load(): Promise<void> {
    const [rows, workers] = await Promise.all([
      liveJobsByQueue(this.db),
      workersSeenWithin(this.db, this.workerWindowMs),
    ]);
    const { jobs, oldestPending, capacity, allocated } = this.gauges;
    // Queues past the cap add up under "other", whose oldest is the oldest of them.
    const counts = new Map<string, number>();
    const oldest = new Map<string, number>();
    for (const r of rows) {
      const queue = this.queues.label(r.queue);
      const key = `${queue}\0${r.state}`;
      counts.set(key, (counts.get(key) ?? 0) + r.jobs);
      if (r.state === 'pending') oldest.set(queue, Math.max(oldest.get(queue) ?? 0, r.oldest_due_seconds ?? 0));
    }
    jobs.reset();
    oldestPending.reset();
    for (const [key, n] of counts) {
      const [queue, state] = key.split('\0');
      jobs.set({ queue, state }, n);
    }
    for (const [queue, seconds] of oldest) oldestPending.set({ queue }, seconds);
    capacity.reset();
    allocated.reset();
    for (const w of workers
      .filter((x) => x.state !== 'gone' && x.state !== 'deregistered')
      .slice(0, MAX_WORKER_SERIES)) {
      for (const resource of RESOURCES) {
        capacity.set({ worker: w.id, name: w.name, resource }, w.capacity[resource]);
        allocated.set({ worker: w.id, name: w.name, resource }, w.allocated[resource]);
      }
    }
  }
}
