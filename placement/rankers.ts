// Built-in rankers (0..100, higher is better) and the job-order comparator.
import { selectorMatches } from './match.js';
import { jobRequest, RESOURCE_NAMES, type ResourceName } from './resources.js';
import type { PlacementJob, PlacementWorker, Ranker, RankerOptions } from './types.js';

/** framework.MaxNodeScore in the Kubernetes scheduler. */
export const MAX_NODE_SCORE = 100;
/** binPackingMaxFitScore in Nomad's scheduler/rank.go: the top of ScoreFitBinPack's [0, 18]. */
export const NOMAD_MAX_FIT_SCORE = 18;

// ---- options ----

/** A ranker's weight in the pipeline's weighted mean: finite and ≥ 0 (0 records the score but ignores it). */
export function readWeight(rankerName: string, options: RankerOptions): number {
  const weight = options.weight ?? 1;
  if (typeof weight !== 'number' || !Number.isFinite(weight) || weight < 0) {
    throw new Error(`ranker ${rankerName}: weight must be a finite number ≥ 0, got ${JSON.stringify(weight)}`);
  }
  return weight;
}

/** Options come from JSON config, so a misspelt param is an error rather than silently ignored. */
export function rejectUnknownOptions(rankerName: string, options: object, known: readonly string[]): void {
  const unknown = Object.keys(options).filter((k) => k !== 'weight' && !known.includes(k));
  if (unknown.length) {
    const accepted = known.length ? known.join(', ') : 'none besides weight';
    throw new Error(`ranker ${rankerName}: unknown option ${unknown.join(', ')} (accepted: ${accepted})`);
  }
}

export type ResourceWeights = Partial<Record<ResourceName, number>>;

export interface ResourceAllocationOptions extends RankerOptions {
  /** Per-resource weights, integers 1..100 as Kubernetes validates them. Default { cpu: 1, memoryMb: 1 }. */
  resourceWeights?: ResourceWeights;
}

const DEFAULT_RESOURCE_WEIGHTS: ResourceWeights = { cpu: 1, memoryMb: 1 };

function readResourceWeights(rankerName: string, given: unknown): [ResourceName, number][] {
  const weights = given ?? DEFAULT_RESOURCE_WEIGHTS;
  if (typeof weights !== 'object' || weights === null || Array.isArray(weights)) {
    throw new Error(`ranker ${rankerName}: resourceWeights must be an object such as { "cpu": 1, "memoryMb": 1 }`);
  }
  const entries = Object.entries(weights);
  if (entries.length === 0) throw new Error(`ranker ${rankerName}: resourceWeights must name at least one resource`);
  return entries.map(([resource, weight]) => {
    if (!(RESOURCE_NAMES as readonly string[]).includes(resource)) {
      throw new Error(`ranker ${rankerName}: unknown resource ${resource} (known: ${RESOURCE_NAMES.join(', ')})`);
    }
    if (!Number.isInteger(weight) || weight < 1 || weight > MAX_NODE_SCORE) {
      const got = JSON.stringify(weight);
      throw new Error(`ranker ${rankerName}: weight of ${resource} must be an integer 1..100, got ${got}`);
    }
    return [resource as ResourceName, weight as number];
  });
}

// ---- Kubernetes NodeResourcesFit scoring strategies ----

/** k8s least_allocated.go leastRequestedScore: (capacity - requested) * 100 / capacity; 0 if capacity 0 or requested > capacity. */
export function leastRequestedScore(requested: number, capacity: number): number {
  if (capacity === 0 || requested > capacity) return 0;
  return Math.trunc(((capacity - requested) * MAX_NODE_SCORE) / capacity);
}

/** k8s most_allocated.go mostRequestedScore: min(requested, capacity) * 100 / capacity; 0 if capacity is 0. */
export function mostRequestedScore(requested: number, capacity: number): number {
  if (capacity === 0) return 0;
  return Math.trunc((Math.min(requested, capacity) * MAX_NODE_SCORE) / capacity);
}

/**
 * k8s resource_allocation.go: requested = already allocated + this job's request, per resource;
 * node score = sum(resourceScore * weight) / sum(weight) in integer division.
 * (Kubernetes also counts pods without requests as 100m cpu / 200MB; Skipjack jobs without requests take 0.)
 */
function resourceAllocationRanker(
  name: string,
  resourceScore: (requested: number, capacity: number) => number,
  options: ResourceAllocationOptions,
): Ranker {
  rejectUnknownOptions(name, options, ['resourceWeights']);
  const weight = readWeight(name, options);
  const resourceWeights = readResourceWeights(name, options.resourceWeights);
  return {
    name,
    weight,
    score(job, worker) {
      const need = jobRequest(job);
      let nodeScore = 0;
      let weightSum = 0;
      for (const [resource, w] of resourceWeights) {
        nodeScore += resourceScore(worker.allocated[resource] + need[resource], worker.capacity[resource]) * w;
        weightSum += w;
      }
      return weightSum === 0 ? 0 : Math.trunc(nodeScore / weightSum);
    },
  };
}

/** Spread. Kubernetes LeastAllocated (least_allocated.go): weighted mean of (capacity - requested) * 100 / capacity. */
export function leastAllocated(options: ResourceAllocationOptions = {}): Ranker {
  return resourceAllocationRanker('least-allocated', leastRequestedScore, options);
}

/** Bin-pack. Kubernetes MostAllocated (most_allocated.go): weighted mean of min(requested, capacity) * 100 / capacity. */
export function mostAllocated(options: ResourceAllocationOptions = {}): Ranker {
  return resourceAllocationRanker('most-allocated', mostRequestedScore, options);
}

// ---- Nomad ScoreFitBinPack / ScoreFitSpread ----
// total = 10^freeCpu + 10^freeMem, free fractions in 0..1: 2 when full, 20 when idle.

function clampFit(score: number): number {
  return Math.min(NOMAD_MAX_FIT_SCORE, Math.max(0, score));
}

/** nomad/structs/funcs.go ScoreFitBinPack: clamp(20 - (10^freeCpu + 10^freeMem), 0, 18). */
export function scoreFitBinPack(freeCpu: number, freeMem: number): number {
  return clampFit(20 - (10 ** freeCpu + 10 ** freeMem));
}

/** nomad/structs/funcs.go ScoreFitSpread: clamp((10^freeCpu + 10^freeMem) - 2, 0, 18). */
export function scoreFitSpread(freeCpu: number, freeMem: number): number {
  return clampFit(10 ** freeCpu + 10 ** freeMem - 2);
}

/**
 * Nomad computeFreePercentage: 1 - used/capacity, with used including this job (Nomad scores the
 * proposed allocation). Nomad nodes always have cpu and memory; capacity 0 here counts as full.
 */
function freeFraction(worker: PlacementWorker, job: PlacementJob, resource: 'cpu' | 'memoryMb'): number {
  const capacity = worker.capacity[resource];
  return capacity > 0 ? 1 - (worker.allocated[resource] + jobRequest(job)[resource]) / capacity : 0;
}

function nomadRanker(name: string, fit: (freeCpu: number, freeMem: number) => number, options: RankerOptions): Ranker {
  rejectUnknownOptions(name, options, []);
  return {
    name,
    weight: readWeight(name, options),
    // Nomad normalizes by /18 to 0..1 (scheduler/rank.go); we map to 0..100.
    score: (job, worker) =>
      (fit(freeFraction(worker, job, 'cpu'), freeFraction(worker, job, 'memoryMb')) * 100) / NOMAD_MAX_FIT_SCORE,
  };
}

/** Nomad's default algorithm, ScoreFitBinPack (structs/funcs.go) normalized: 100 * clamp(20 - total, 0, 18) / 18. */
export function binpack(options: RankerOptions = {}): Ranker {
  return nomadRanker('binpack', scoreFitBinPack, options);
}

/** Nomad's spread algorithm, ScoreFitSpread (structs/funcs.go) normalized: 100 * clamp(total - 2, 0, 18) / 18. */
export function spread(options: RankerOptions = {}): Ranker {
  return nomadRanker('spread', scoreFitSpread, options);
}

// ---- soft label preferences ----

/**
 * Soft labels. Nomad NodeAffinityIterator (scheduler/rank.go) for the positive weights the protocol allows:
 * 100 * sum(weights of matched preferences) / sum(all weights). No preferences: 0 on every worker, since a
 * constant never changes the choice and 0 does not pretend a preference was met.
 */
export function affinity(options: RankerOptions = {}): Ranker {
  rejectUnknownOptions('affinity', options, []);
  return {
    name: 'affinity',
    weight: readWeight('affinity', options),
    score(job, worker) {
      let all = 0;
      let matched = 0;
      for (const preference of job.preferences) {
        all += preference.weight;
        if (selectorMatches(preference.labels, worker.labels)) matched += preference.weight;
      }
      return all > 0 ? (100 * matched) / all : 0;
    },
  };
}

// ---- job order ----

/** Queue order, not a worker ranker: higher priority first, then older createdAt, then lower id. */
export function compareJobs(a: PlacementJob, b: PlacementJob): number {
  return b.priority - a.priority || a.createdAt - b.createdAt || a.id - b.id;
}
