// Claim routes: the claim (long-polling, and with releases, release-and-claim), the single-job
// claim, and the poll (what a worker could claim, without taking it).
import { Router, type Response } from 'express';
import type { z } from 'zod';
import { availableQuerySchema, claimOneSchema, claimSchema } from '../../protocol/schemas.js';
import type { AppContext } from '../context.js';
import type { ClaimRow } from '../db.js';
import { unknownWorker } from '../errors.js';
import { claimWithWait } from '../long-poll/claim-with-wait.js';
import { answerReleases, release } from '../releases.js';
import { availableJobs, claimOne, claimsInOneStatement, releaseAndClaim } from '../store/claims.js';
import { toClaimAnswer, toClaimedJob, toJobView } from '../store/job-view.js';
import { leaseClock, markLeases } from '../store/lease-age.js';
import type { ReleaseRequest } from '../store/leases.js';
import { idParam, parse } from '../validate.js';

export function claimRoutes(ctx: AppContext): Router {
  const r = Router();
  const ttl = () => ctx.config.leaseTtlMs;

  // The poll shares its path with the job list (routes/jobs.ts), which answers every other GET /jobs.
  r.get('/jobs', async (req, res, next) => {
    if (!('available' in req.query || 'worker' in req.query)) return next();
    const q = parse(availableQuerySchema, req.query, 'query');
    const jobs = await availableJobs(ctx.db, ctx.placement, q.worker, q.limit);
    res.json({ jobs: jobs.map(toJobView) });
  });

  r.post('/jobs/:id/claim', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    const { workerId } = parse(claimOneSchema, req.body, 'body');
    const before = leaseClock();
    const job = markLeases([await claimOne(ctx.db, ctx.placement, workerId, id, ttl())], before)[0];
    logClaims(ctx, workerId, [job]);
    res.json(toClaimedJob(job));
  });

  r.post('/claims', async (req, res) => {
    const arrivedAt = leaseClock();
    const timer = ctx.metrics.claimLatency.startTimer();
    const c = parse(claimSchema, req.body, 'body');
    const waitMs = Math.min(c.waitMs, ctx.config.maxWaitMs);
    res.once('close', () => timer({ long_poll: String(waitMs > 0) }));
    ctx.waitingPolls.supersede(c.workerId);
    // A claim that carries releases does not wait (the worker's jobs are done only once it is answered).
    const { released, jobs, superseded } =
      c.releases?.length && waitMs === 0 && claimsInOneStatement(ctx.placement)
        ? { ...(await releaseAndClaimNow(ctx, c.workerId, c.releases, c.max)), superseded: false }
        : await releaseThenLongPoll(ctx, c, waitMs, res);
    const releases = released ? { releases: released } : {};
    if (res.destroyed || superseded) {
      await handBack(ctx, c.workerId, jobs);
      if (res.destroyed) return;
      ctx.log.info({ workerId: c.workerId }, 'a newer claim from this worker ended its long-poll');
      return void res.json({ jobs: [], ...releases });
    }
    logClaims(ctx, c.workerId, jobs);
    res.json({ ...toClaimAnswer(jobs, arrivedAt), ...releases });
  });

  return r;
}

async function releaseThenLongPoll(ctx: AppContext, c: z.output<typeof claimSchema>, waitMs: number, res: Response) {
  const released = c.releases?.length ? await release(ctx, c.releases) : undefined;
  // A claim that does not wait is answered at once: nothing to supersede (two at once are fine).
  if (waitMs === 0) return { released, jobs: await claimWithWait(ctx, c.workerId, c.max, 0, res), superseded: false };
  const superseded = ctx.waitingPolls.begin(c.workerId);
  try {
    const jobs = await claimWithWait(ctx, c.workerId, c.max, waitMs, res, superseded);
    return { released, jobs, superseded: superseded.aborted };
  } finally {
    ctx.waitingPolls.end(c.workerId, superseded);
  }
}

async function releaseAndClaimNow(ctx: AppContext, workerId: string, releases: ReleaseRequest[], max: number) {
  const seq = ctx.hub.jobsSeq;
  const before = leaseClock();
  const out = await releaseAndClaim(ctx.db, workerId, releases, { max, leaseTtlMs: ctx.config.leaseTtlMs });
  markLeases(out.claimed, before);
  const released = answerReleases(ctx, releases, out.released);
  if (!out.workerKnown) throw unknownWorker(workerId);
  if (out.claimed.length === 0) ctx.idleClaims.remember(workerId, seq, max);
  else ctx.idleClaims.forget(workerId);
  return { released, jobs: out.claimed };
}

/**
 * The claimer hung up (a draining worker aborts its long-poll) after we had claimed for it: it
 * will never see these jobs, so they go straight back, uncharged, instead of waiting out a lease.
 */
async function handBack(ctx: AppContext, workerId: string, jobs: ClaimRow[]) {
  if (jobs.length === 0) return;
  await release(
    ctx,
    jobs.map((j) => ({
      jobId: j.id,
      leaseToken: j.lease_token!,
      outcome: 'requeue' as const,
      reason: 'lost' as const,
    })),
  );
  ctx.log.info({ workerId, jobIds: jobs.map((j) => j.id) }, 'claimer hung up before the answer; jobs requeued');
}

function logClaims(ctx: AppContext, workerId: string, jobs: ClaimRow[]) {
  ctx.metrics.claimed.inc(jobs.length);
  ctx.metrics.samples.claimed(jobs.map((j) => ({ id: j.id, runs: j.runs })));
  for (const j of jobs) ctx.log.info({ jobId: j.id, workerId, attempt: j.runs }, 'job claimed');
}
