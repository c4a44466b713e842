// The explained "no": why a job cannot run anywhere, or why it is still waiting.
import {
  firstFailure,
  idleWorker,
  neverFitsReason,
  place,
  queueFilter,
  staticFilters,
  type PlacementJob,
  type PlacementWorker,
} from '../../placement/index.js';
import type { PlacementExplanation } from '../../protocol/types.js';
import type { Db, JobRow } from '../db.js';
import { toPlacementJob } from './rows.js';
import type { PlacementSettings } from './settings.js';
import { workersToExplain, type KnownWorkers } from './workers.js';

/** What an explanation reads, of the server's context (AppContext has it all). */
export interface ExplainContext {
  db: Db;
  config: { workerGoneAfterMs: number; workerUnresponsiveMs: number };
  placement: PlacementSettings;
  knownWorkers: KnownWorkers;
}

/** The job run through its queue's pipeline against the live workers, as of now. */
async function placeNow(ctx: ExplainContext, job: JobRow) {
  const workers = await workersToExplain(ctx.db, ctx.config.workerGoneAfterMs, ctx.config.workerUnresponsiveMs);
  return {
    workers,
    result: place(toPlacementJob(job), workers, { ...ctx.placement.configFor(job.queue), ctx: { now: Date.now() } }),
  };
}

export async function explainPlacement(ctx: ExplainContext, job: JobRow): Promise<PlacementExplanation> {
  const { workers, result } = await placeNow(ctx, job);
  return {
    jobId: job.id,
    state: job.state,
    mode: ctx.placement.modeFor(job.queue),
    summary: workers.length === 0 ? 'no live worker' : result.summary,
    bestWorkerId: result.chosen?.id ?? null,
    verdicts: result.verdicts,
  };
}

/**
 * For enqueue, per job: `refused`, the grouped reasons no known worker of the job's queue could
 * run it even when idle; or, when no known worker serves its queue at all, `waiting`, which says
 * so (a wait, not a "no": its workers may be on their way).
 */
export async function enqueueVerdicts(
  ctx: ExplainContext,
  jobs: PlacementJob[],
): Promise<{ refused: string | null; refusedBy: string | null; waiting: string | null }[]> {
  const known = await ctx.knownWorkers.get();
  const now = Date.now();
  return jobs.map((job) => {
    const serving = known.filter((w) => queueFilter.check(job, w, { now }) === null);
    if (serving.length > 0) {
      const refused = neverFitsReason(job, serving, { now }, staticFilters);
      return { refused, refusedBy: refused && mostRefusingFilter(job, serving, now), waiting: null };
    }
    const waiting =
      known.length === 0
        ? 'no worker is known yet: the job runs when one that fits it registers'
        : `no known worker serves queue ${job.queue}: the job runs when one that serves it and fits it registers`;
    return { refused: null, refusedBy: null, waiting };
  });
}

/** The filter that refused the job at the most workers: the reason a refusal metric counts. */
function mostRefusingFilter(job: PlacementJob, workers: PlacementWorker[], now: number): string | null {
  const counts = new Map<string, number>();
  for (const w of workers) {
    const failed = firstFailure(job, idleWorker(w), staticFilters, { now })?.filter;
    if (failed) counts.set(failed, (counts.get(failed) ?? 0) + 1);
  }
  return [...counts].sort((a, b) => b[1] - a[1])[0]?.[0] ?? null;
}

/** What a pending job is waiting for, in words, computed when asked. */
export async function waitingReason(ctx: ExplainContext, job: JobRow): Promise<string | null> {
  return (await waitingReasons(ctx, [job])).get(job.id) ?? null;
}

/** Job-worker judgements one list may spend (about 7 µs each): its jobs of one shape share one. */
const LIST_JUDGEMENT_BUDGET = 40_000;

/** What each pending job of a list waits for; the live workers are read once for them all. */
export async function waitingReasons(ctx: ExplainContext, jobs: JobRow[]): Promise<Map<number, string>> {
  const reasons = new Map<number, string>();
  const pending = jobs.filter((job) => job.state === 'pending');
  if (pending.length === 0) return reasons;
  const workers = await workersToExplain(ctx.db, ctx.config.workerGoneAfterMs, ctx.config.workerUnresponsiveMs);
  const now = Date.now();
  const byShape = new Map<string, string>();
  let budget = LIST_JUDGEMENT_BUDGET;
  for (const job of pending) {
    if (new Date(job.run_at).getTime() > now)
      reasons.set(job.id, `not due until ${new Date(job.run_at).toISOString()}`);
    else if (workers.length === 0)
      reasons.set(job.id, 'no live worker: the job runs when a worker that fits it registers');
    else {
      const placementJob = toPlacementJob(job);
      const { id: _id, priority: _priority, createdAt: _createdAt, ...shape } = placementJob;
      const key = JSON.stringify(shape);
      let reason = byShape.get(key);
      if (reason === undefined && budget >= workers.length) {
        budget -= workers.length;
        const result = place(placementJob, workers, { ...ctx.placement.configFor(job.queue), ctx: { now } });
        reason = result.chosen ? `waiting for a claim: ${result.summary}` : result.summary;
        byShape.set(key, reason);
      }
      reasons.set(job.id, reason ?? `not worked out in a list this long: GET /jobs/${job.id} says`);
    }
  }
  return reasons;
}
