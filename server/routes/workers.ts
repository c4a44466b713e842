// Agent routes: register, heartbeat, drain, deregister, and the claims.
import { Router, type Request, type Response } from 'express';
import type { z } from 'zod';
import { claimOneSchema, claimSchema, registerWorkerSchema, workerHeartbeatSchema } from '../../protocol/schemas.js';
import type { RegisterResponse } from '../../protocol/types.js';
import type { AppContext } from '../context.js';
import type { ClaimRow } from '../db.js';
import { claimJobs, claimOne, claimsInOneStatement, releaseAndClaim } from '../store/claims.js';
import type { ReleaseRequest } from '../store/leases.js';
import { answerReleases, release } from './leases.js';
import { toClaimedJob } from '../store/job-view.js';
import { allocations, cancelsAndDrain, deregisteredAnswer, deregisterWorker, endLongPoll, getWorker, heldJobs, listWorkers, registerWorker, setWorkerState, toWorkerView } from '../store/workers.js';
import { idParam, parse, workerParam } from '../validate.js';
import { HttpError, unknownWorker } from '../errors.js';
import { actsForWorker, newWorkerKey } from '../auth.js';

export function workerRoutes(ctx: AppContext): Router {
  const r = Router();
  const ttl = () => ctx.config.leaseTtlMs;

  r.post('/workers', async (req, res) => {
    const key = newWorkerKey();
    const w = await registerWorker(ctx.db, parse(registerWorkerSchema, req.body, 'body'), key.sha256);
    ctx.knownWorkers.invalidate();
    ctx.log.info({ workerId: w.id, name: w.name, region: w.region, slots: w.slots }, 'worker registered');
    const body: RegisterResponse = { id: w.id, workerKey: key.key, leaseTtlMs: ttl(), heartbeatIntervalMs: Math.max(100, Math.floor(ttl() / 3)), heartbeatWaits: true };
    res.status(201).json(body);
  });

  r.get('/workers', async (_req, res) => {
    res.json({ workers: await listWorkers(ctx.db) });
  });

  r.get('/workers/:id', async (req, res) => {
    const { id } = parse(workerParam, req.params, 'params');
    const w = await getWorker(ctx.db, id);
    res.json(toWorkerView(w, (await allocations(ctx.db, [id])).get(id)));
  });

  r.post('/workers/:id/heartbeat', async (req, res) => {
    const { id } = parse(workerParam, req.params, 'params');
    const { leases, waitMs } = parse(workerHeartbeatSchema, req.body, 'body');
    // Listening from the start: a cancel made while the heartbeat waits for its batch counts too.
    const news = waitMs > 0 ? listenForCancelOrDrain(ctx, id, res) : null;
    try {
      const answer = await ctx.heartbeats.submit({ workerId: id, leases });
      if (!answer) throw unknownWorker(id);
      if (answer.deregistered) ctx.log.info({ workerId: id, leases: leases.length }, 'heartbeat from a deregistered worker; told to stop');
      else for (const jobId of answer.lost) ctx.log.warn({ jobId, workerId: id }, 'heartbeat for a lease the worker no longer holds');
      const nothingToSay = answer.cancel.length === 0 && !answer.drain;
      if (!news || !nothingToSay || !(await news.wait(Math.min(waitMs, ctx.config.maxWaitMs)))) return void res.json(answer);
      // Woken by a cancel, a drain or a deregistration: say which.
      const { deregistered, ...said } = await cancelsAndDrain(ctx.db, id);
      res.json(deregistered ? deregisteredAnswer(leases) : { ...said, lost: answer.lost });
    } finally {
      news?.stop();
    }
  });

  r.post('/workers/:id/drain', async (req, res) => {
    const { id } = parse(workerParam, req.params, 'params');
    const w = await setWorkerState(ctx.db, id, 'draining');
    ctx.log.info({ workerId: id }, 'worker asked to drain');
    res.json(toWorkerView(w));
  });

  // Final: its leases are taken back now, and its heartbeats are answered with a stop from now on.
  r.delete('/workers/:id', async (req, res) => {
    const { id } = parse(workerParam, req.params, 'params');
    await mustActForWorker(ctx, req, res, id, 'deregisters');
    const { worker, reaped } = await deregisterWorker(ctx.db, id);
    ctx.knownWorkers.invalidate();
    for (const job of reaped) ctx.log.warn({ jobId: job.id, workerId: id, attempt: job.runs, state: job.state }, 'worker deregistered while running the job; run recorded as lost');
    ctx.log.info({ workerId: id, jobsTakenBack: reaped.length }, 'worker deregistered');
    res.json(toWorkerView(worker));
  });

  // A worker with more room than its waiting long-poll asked for: the long-poll answers now with
  // what it has, and the worker asks again. Hanging up on it instead would lose jobs claimed for
  // it a moment before, their answer already on its way. Whichever server holds it hears this.
  r.post('/workers/:id/end-poll', async (req, res) => {
    const { id } = parse(workerParam, req.params, 'params');
    await mustActForWorker(ctx, req, res, id, 'ends the long-poll of');
    await endLongPoll(ctx.db, id);
    res.status(204).end();
  });

  // What the server says this worker runs: a worker whose claim's answer never came (its
  // connection cut after the jobs were taken) finds them here. Lease tokens: its own key only.
  r.get('/workers/:id/leases', async (req, res) => {
    const { id } = parse(workerParam, req.params, 'params');
    await mustActForWorker(ctx, req, res, id, 'reads the leases of');
    res.json({ jobs: (await heldJobs(ctx.db, id)).map(toClaimedJob) });
  });

  r.post('/jobs/:id/claim', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    const { workerId } = parse(claimOneSchema, req.body, 'body');
    const job = await claimOne(ctx.db, ctx.placement, workerId, id, ttl());
    logClaims(ctx, workerId, [job]);
    res.json(toClaimedJob(job));
  });

  r.post('/claims', async (req, res) => {
    const c = parse(claimSchema, req.body, 'body');
    const waitMs = Math.min(c.waitMs, ctx.config.maxWaitMs);
    ctx.waitingPolls.supersede(c.workerId);
    // A claim that carries releases does not wait (the worker's jobs are done only once it is answered).
    const { released, jobs, superseded } = c.releases?.length && waitMs === 0 && claimsInOneStatement(ctx.placement)
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
    res.json({ jobs: jobs.map(toClaimedJob), ...releases });
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
  const out = await releaseAndClaim(ctx.db, workerId, releases, { max, leaseTtlMs: ctx.config.leaseTtlMs });
  const released = answerReleases(ctx, releases, out.released);
  if (!out.workerKnown) throw unknownWorker(workerId);
  if (out.claimed.length === 0) ctx.idleClaims.remember(workerId, seq, max);
  else ctx.idleClaims.forget(workerId);
  return { released, jobs: out.claimed };
}

/** A worker token acts only for the worker whose key it shows; an admin token for any. */
async function mustActForWorker(ctx: AppContext, req: Request, res: Response, workerId: string, action: string): Promise<void> {
  if (actsForWorker(res, (await getWorker(ctx.db, workerId)).key_sha256, req.get('x-worker-key'))) return;
  throw new HttpError(403, 'not_this_worker', `headers.x-worker-key: a worker token ${action} only the worker whose key it shows (its registration returned it as workerKey); an admin token ${action} any`);
}

/** How soon a long-poll whose claim skipped jobs other claims held looks again. */
const CONTENDED_RECHECK_MS = 100;

/** Long-poll: claim; if nothing fits, sleep until NOTIFY says a job is due (or a drain), then retry. */
async function claimWithWait(ctx: AppContext, workerId: string, max: number, waitMs: number, res: Response, superseded?: AbortSignal): Promise<ClaimRow[]> {
  const deadline = Date.now() + waitMs;
  const { abort, dispose } = abortOnHangUpOrStop(ctx, res, superseded);
  const endForThisWorker = (p: string) => { if (p === workerId) abort.abort(); };
  const stopOnDrain = ctx.hub.on('skipjack_drain', endForThisWorker);
  const stopOnEndPoll = ctx.hub.on('skipjack_end_poll', endForThisWorker);
  try {
    for (;;) {
      if (abort.signal.aborted) return [];
      const seq = ctx.hub.jobsSeq;
      let contended = false;
      if (!ctx.idleClaims.nothingNew(workerId, seq, max)) {
        const claimed = await claimJobs(ctx.db, ctx.placement, workerId, { max, leaseTtlMs: ctx.config.leaseTtlMs });
        if (claimed.jobs.length > 0) {
          ctx.idleClaims.forget(workerId);
          return claimed.jobs;
        }
        contended = claimed.contended;
        if (contended) ctx.idleClaims.forget(workerId);
        else ctx.idleClaims.remember(workerId, seq, max);
      }
      const left = deadline - Date.now();
      if (left <= 0 || abort.signal.aborted) return [];
      const sleeping = ctx.sleepingClaims.sleep(workerId, max);
      try {
        // Skipped jobs may be left by the claim that holds them, and no NOTIFY would say so.
        await ctx.hub.waitForJobs(seq, contended ? Math.min(left, CONTENDED_RECHECK_MS) : left, [abort.signal, sleeping.woken]);
      } finally {
        ctx.sleepingClaims.wake(sleeping);
      }
      // Taken by an enqueue: its claim for this worker committed with the insert, so the answer is ours.
      const handed = sleeping.handed ? await sleeping.handed : [];
      if (handed.length > 0) {
        ctx.idleClaims.forget(workerId);
        return handed;
      }
    }
  } finally {
    dispose();
    stopOnDrain();
    stopOnEndPoll();
  }
}

/**
 * Aborted when the client hangs up or the server begins to stop, also when either happened
 * before this was called: a long-poll that arrives once the stop has begun (a worker asks again
 * at once when answered empty) sees no abort event, and a closed hub wakes it at once, so it
 * would spin to its deadline.
 */
function abortOnHangUpOrStop(ctx: AppContext, res: Response, superseded?: AbortSignal): { abort: AbortController; dispose(): void } {
  const abort = new AbortController();
  // The response's close, not the request's: a request closes once its body has been read.
  const onEnd = () => abort.abort();
  res.on('close', onEnd);
  ctx.closing.addEventListener('abort', onEnd);
  superseded?.addEventListener('abort', onEnd);
  if (ctx.closing.aborted || res.destroyed || superseded?.aborted) abort.abort();
  return {
    abort,
    dispose() {
      res.off('close', onEnd);
      ctx.closing.removeEventListener('abort', onEnd);
      superseded?.removeEventListener('abort', onEnd);
    },
  };
}

/**
 * Listens for a cancel or a drain addressed to this worker (by NOTIFY, from any server). `wait`
 * resolves true at once if one came already, or when one comes within `ms`; false when the time
 * runs out, the worker hangs up, or the server stops.
 */
function listenForCancelOrDrain(ctx: AppContext, workerId: string, res: Response) {
  const { abort: stopped, dispose } = abortOnHangUpOrStop(ctx, res);
  let heard = false;
  let wake = () => {};
  const onNews = (payload: string) => {
    // '' comes after the LISTEN connection was restored: what came meanwhile is unknown.
    if (payload !== workerId && payload !== '') return;
    heard = true;
    wake();
  };
  const offCancel = ctx.hub.on('skipjack_cancel', onNews);
  const offDrain = ctx.hub.on('skipjack_drain', onNews);
  return {
    wait(ms: number): Promise<boolean> {
      if (heard || stopped.signal.aborted) return Promise.resolve(heard);
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        const finish = () => { clearTimeout(timer); resolve(heard); };
        wake = finish;
        stopped.signal.addEventListener('abort', finish, { once: true });
      });
    },
    stop() {
      offCancel();
      offDrain();
      dispose();
      stopped.abort();
    },
  };
}

/**
 * The claimer hung up (a draining worker aborts its long-poll) after we had claimed for it: it
 * will never see these jobs, so they go straight back, uncharged, instead of waiting out a lease.
 */
async function handBack(ctx: AppContext, workerId: string, jobs: ClaimRow[]) {
  if (jobs.length === 0) return;
  await release(ctx, jobs.map((j) => ({ jobId: j.id, leaseToken: j.lease_token!, outcome: 'requeue' as const, reason: 'lost' as const })));
  ctx.log.info({ workerId, jobIds: jobs.map((j) => j.id) }, 'claimer hung up before the answer; jobs requeued');
}

function logClaims(ctx: AppContext, workerId: string, jobs: ClaimRow[]) {
  ctx.metrics.claimed.inc(jobs.length);
  for (const j of jobs) ctx.log.info({ jobId: j.id, workerId, attempt: j.runs }, 'job claimed');
}
