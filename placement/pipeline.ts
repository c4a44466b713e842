// The placement pipeline: filter every candidate, score the survivors, take the weighted mean,
// pick the best, break ties deterministically. Also the pull-mode selection for one worker.
import { firstFailure, resourcesFilter, staticFilters } from './filters.js';
import { compareJobs } from './rankers.js';
import { summarizeUnfit } from './reasons.js';
import { allocate, idleWorker } from './resources.js';
import type {
  Filter,
  PlacementConfig,
  PlacementContext,
  PlacementJob,
  PlacementWorker,
  Ranker,
  Verdict,
} from './types.js';

export interface PlaceOptions extends PlacementConfig {
  ctx: PlacementContext;
  /** Without it, ties go to the lowest worker id; with it, to a draw reproducible from (seed, job id). */
  tieBreak?: { seed: number };
}

export interface PlacementResult {
  chosen: PlacementWorker | null;
  /** One per worker, in the order the workers were given. */
  verdicts: Verdict[];
  /** "F/T workers fit: N reason, ..." (see summarizeUnfit). */
  summary: string;
}

/** Totals closer than this are a tie: float sums of equal scores may differ in the last bits. */
const TIE_EPSILON = 1e-9;

/** A misbehaving plugin's NaN or out-of-range score must not dominate the sum. */
function clampScore(score: number): number {
  return Number.isFinite(score) ? Math.min(100, Math.max(0, score)) : 0;
}

/** sum(weight * score) / sum(weight), so the total stays on the rankers' 0..100 scale; 0 with no weight. */
function weightedMean(rankers: readonly Ranker[], scores: readonly number[]): number {
  const weightSum = rankers.reduce((sum, r) => sum + r.weight, 0);
  if (weightSum === 0) return 0;
  return rankers.reduce((sum, r, i) => sum + r.weight * scores[i]!, 0) / weightSum;
}

function judge(
  job: PlacementJob,
  worker: PlacementWorker,
  config: PlacementConfig & { ctx: PlacementContext },
): Verdict {
  const who = { workerId: worker.id, workerName: worker.name };
  const failure = firstFailure(job, worker, config.filters, config.ctx);
  if (failure) return { ...who, fits: false, ...failure };
  const scores = config.rankers.map((r) => clampScore(r.score(job, worker, config.ctx)));
  const byName = Object.fromEntries(config.rankers.map((r, i) => [r.name, scores[i]!]));
  return { ...who, fits: true, scores: byName, total: weightedMean(config.rankers, scores) };
}

/** mulberry32: a tiny, well-distributed 32-bit PRNG, enough for tie-breaks and simulations. */
export function mulberry32(seed: number): () => number {
  let a = seed | 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Mixing in the job id keeps one seed from sending every tied job to the same relative position. */
function tieBreakRandom(seed: number, job: PlacementJob): () => number {
  return mulberry32(seed ^ Math.imul(job.id | 0, 0x9e3779b1));
}

function byId(a: PlacementWorker, b: PlacementWorker): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

function pickBest(
  job: PlacementJob,
  workers: readonly PlacementWorker[],
  verdicts: readonly Verdict[],
  tieBreak: PlaceOptions['tieBreak'],
): PlacementWorker | null {
  const fitting = verdicts.flatMap((v, i) => (v.fits ? [{ worker: workers[i]!, total: v.total! }] : []));
  if (fitting.length === 0) return null;
  const best = Math.max(...fitting.map((f) => f.total));
  // Sorted by id so the outcome does not depend on the order the workers were listed in.
  const tied = fitting
    .filter((f) => best - f.total <= TIE_EPSILON)
    .map((f) => f.worker)
    .sort(byId);
  if (!tieBreak) return tied[0]!;
  return tied[Math.floor(tieBreakRandom(tieBreak.seed, job)() * tied.length)]!;
}

/** Central mode: the best worker for one job, with every worker's verdict and a summary of the rejections. */
export function place(job: PlacementJob, workers: readonly PlacementWorker[], options: PlaceOptions): PlacementResult {
  const verdicts = workers.map((w) => judge(job, w, options));
  return {
    chosen: pickBest(job, workers, verdicts, options.tieBreak),
    verdicts,
    summary: summarizeUnfit(verdicts, workers.length),
  };
}

/**
 * For enqueue's 422: a summary of why no worker could run the job even if idle, or null if one could.
 * Only the static filters by default: a worker busy or draining now may take the job later.
 */
export function neverFitsReason(
  job: PlacementJob,
  workers: readonly PlacementWorker[],
  ctx: PlacementContext,
  filters: readonly Filter[] = staticFilters,
): string | null {
  const verdicts = workers.map((w) => judge(job, idleWorker(w), { filters, rankers: [], ctx }));
  return verdicts.some((v) => v.fits) ? null : summarizeUnfit(verdicts, workers.length);
}

export interface PullOptions {
  filters: readonly Filter[];
  ctx: PlacementContext;
  /** At most this many jobs in one claim. Default: no limit beyond the worker's free slots. */
  max?: number;
}

export interface PullSelection {
  /** Jobs that pass every filter for this worker, in queue order (compareJobs). */
  eligible: PlacementJob[];
  /** The greedy claim: eligible jobs in order, each taken if it still fits after those taken before it. */
  claim: PlacementJob[];
}

/**
 * Pull mode, after the SQL pre-filter: which of these jobs this worker may run, and which to claim now.
 * The claim skips a job that no longer fits and tries smaller ones after it (first fit in queue order):
 * it keeps workers busy, at the cost that a large job can wait behind a stream of small ones.
 */
export function rankJobsForWorker(
  jobs: readonly PlacementJob[],
  worker: PlacementWorker,
  options: PullOptions,
): PullSelection {
  const eligible = jobs.filter((j) => firstFailure(j, worker, options.filters, options.ctx) === null).sort(compareJobs);
  const max = options.max ?? Infinity;
  const claim: PlacementJob[] = [];
  let remaining = worker;
  for (const job of eligible) {
    if (claim.length >= max) break;
    if (resourcesFilter.check(job, remaining, options.ctx) !== null) continue;
    claim.push(job);
    remaining = allocate(remaining, job);
  }
  return { eligible, claim };
}
