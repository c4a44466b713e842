// Built-in filters: the hard constraints. Each returns null when the worker fits, else why not.
import { describeMismatch, labelMismatch } from './match.js';
import { formatShortage } from './reasons.js';
import { freeCapacity, idleWorker, jobRequest, RESOURCE_LABELS, RESOURCE_NAMES } from './resources.js';
import type { Filter, PlacementContext, PlacementJob, PlacementWorker } from './types.js';

/** job.constraints.region: exact, or one of a set. A worker without a region fits no region constraint. */
export const regionFilter: Filter = {
  name: 'region',
  check(job, worker) {
    const want = job.constraints.region;
    return want === undefined ? null : describeMismatch('region ', worker.region, want);
  },
};

/**
 * One free slot, then each requested resource against free capacity (capacity - allocated).
 * Like Kubernetes NodeResourcesFit, a resource the job does not request (0) is not checked.
 */
export const resourcesFilter: Filter = {
  name: 'resources',
  check(job, worker) {
    const need = jobRequest(job);
    const free = freeCapacity(worker);
    if (free.slots < need.slots) return 'no free slot';
    for (const r of RESOURCE_NAMES) {
      if (need[r] > 0 && need[r] > free[r]) {
        return formatShortage({ resource: RESOURCE_LABELS[r], need: need[r], free: Math.max(0, free[r]) });
      }
    }
    return null;
  },
};

/** job.constraints.labels as a nodeSelector: every key present, equal or a member of the listed set. */
export const labelsFilter: Filter = {
  name: 'labels',
  check(job, worker) {
    const selector = job.constraints.labels;
    return selector ? labelMismatch(selector, worker.labels) : null;
  },
};

/** Only active workers take new work; draining ones finish what they hold. */
export const workerActiveFilter: Filter = {
  name: 'worker-active',
  check(_job, worker) {
    return worker.state === 'active' ? null : `worker ${worker.state}`;
  },
};

/** A worker takes jobs only from the queues it serves. The server always runs this one first. */
export const queueFilter: Filter = {
  name: 'queue',
  check(job, worker) {
    return !worker.queues || worker.queues.includes(job.queue) ? null : `queue ${job.queue} not served`;
  },
};

/** The default order: cheap and fundamental first, so a region mismatch is reported as such, not as memory. */
export const defaultFilters: readonly Filter[] = [workerActiveFilter, regionFilter, labelsFilter, resourcesFilter];

/** The filters that depend only on what a worker is, not on what it is doing now. */
export const staticFilters: readonly Filter[] = [regionFilter, labelsFilter, resourcesFilter];

export interface FilterFailure {
  filter: string;
  reason: string;
}

/** The first filter that rejects the worker. An empty reason still rejects; a plugin returning undefined accepts. */
export function firstFailure(
  job: PlacementJob,
  worker: PlacementWorker,
  filters: readonly Filter[],
  ctx: PlacementContext,
): FilterFailure | null {
  for (const filter of filters) {
    const reason = filter.check(job, worker, ctx);
    if (reason !== null && reason !== undefined) return { filter: filter.name, reason };
  }
  return null;
}

/**
 * Why the job could never run on this worker, even idle (capacity instead of free); null if it could.
 * Enqueue uses it to answer 422 "no known worker could ever run this".
 */
export function fitsWhenIdle(
  job: PlacementJob,
  worker: PlacementWorker,
  ctx: PlacementContext,
  filters: readonly Filter[] = staticFilters,
): string | null {
  return firstFailure(job, idleWorker(worker), filters, ctx)?.reason ?? null;
}
