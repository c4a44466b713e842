// Releasing runs and answering for each: what the lease routes (/releases, /jobs/:id/release)
// and the claim routes (a claim that carries releases, a hand-back) share.
import type { AppContext } from './context.js';
import { staleLease } from './errors.js';
import { releaseJobs, type ReleasedRun, type ReleaseRequest } from './store/leases.js';

/** Releases many runs in one statement and answers each; shared by /releases and /claims. */
export async function release(ctx: AppContext, releases: ReleaseRequest[]) {
  return answerReleases(ctx, releases, await releaseJobs(ctx.db, releases));
}

export function answerReleases(ctx: AppContext, releases: ReleaseRequest[], done: Map<number, ReleasedRun>) {
  return releases.map(({ jobId, outcome, exitCode, signal }) => {
    const job = done.get(jobId);
    if (!job) {
      ctx.metrics.staleLease.inc();
      ctx.log.warn({ jobId }, 'release refused: stale lease token');
      const e = staleLease(jobId);
      return { jobId, ok: false as const, error: e.code, message: e.message };
    }
    ctx.metrics.released.inc({ outcome });
    ctx.metrics.samples.released([{ id: jobId, runs: job.runs, outcome }]);
    // Its worker has room again: its next claim must look, even if nothing new was enqueued.
    ctx.idleClaims.forget(job.released_by);
    ctx.log.info(
      { jobId, workerId: job.released_by, attempt: job.runs, outcome, state: job.state, exitCode, signal },
      'job released',
    );
    return { jobId, ok: true as const, state: job.state };
  });
}
