// Worker routes: register, heartbeat (held while it has nothing to say), drain, deregister, end
// a waiting long-poll, and the leases a worker holds. The claims are in routes/claims.ts.
import { Router, type Request, type Response } from 'express';
import { registerWorkerSchema, workerHeartbeatSchema } from '../../protocol/schemas.js';
import type { RegisterResponse } from '../../protocol/types.js';
import type { AppContext } from '../context.js';
import { listenForCancelOrDrain } from '../long-poll/cancel-or-drain.js';
import { allocations } from '../placement/workers.js';
import { toClaimAnswer } from '../store/job-view.js';
import { heldMs, leaseClock } from '../store/lease-age.js';
import {
  cancelsAndDrain,
  deregisteredAnswer,
  deregisterWorker,
  endLongPoll,
  getWorker,
  heldJobs,
  listWorkers,
  registerWorker,
  setWorkerState,
  toWorkerView,
} from '../store/workers.js';
import { parse, workerParam } from '../validate.js';
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
    const body: RegisterResponse = {
      id: w.id,
      workerKey: key.key,
      leaseTtlMs: ttl(),
      heartbeatIntervalMs: Math.max(100, Math.floor(ttl() / 3)),
      heartbeatWaits: true,
    };
    res.status(201).json(body);
  });

  r.get('/workers', async (_req, res) => {
    res.json({ workers: await listWorkers(ctx.db, ctx.config.workerUnresponsiveMs) });
  });

  r.get('/workers/:id', async (req, res) => {
    const { id } = parse(workerParam, req.params, 'params');
    const w = await getWorker(ctx.db, id);
    res.json(toWorkerView(w, (await allocations(ctx.db, [id])).get(id), ctx.config.workerUnresponsiveMs));
  });

  r.post('/workers/:id/heartbeat', async (req, res) => {
    const { id } = parse(workerParam, req.params, 'params');
    const arrivedAt = leaseClock();
    const { leases, waitMs } = parse(workerHeartbeatSchema, req.body, 'body');
    // Listening from the start: a cancel made while the heartbeat waits for its batch counts too.
    const news = waitMs > 0 ? listenForCancelOrDrain(ctx, id, res) : null;
    try {
      // The leases are extended after this, in the batch's statement.
      const submitted = leaseClock();
      const answer = await ctx.heartbeats.submit({ workerId: id, leases });
      if (!answer) throw unknownWorker(id);
      if (answer.deregistered)
        ctx.log.info({ workerId: id, leases: leases.length }, 'heartbeat from a deregistered worker; told to stop');
      else
        for (const jobId of answer.lost)
          ctx.log.warn({ jobId, workerId: id }, 'heartbeat for a lease the worker no longer holds');
      const nothingToSay = answer.cancel.length === 0 && !answer.drain;
      // Read together when answering: the worker dates the extension from both (lease-clock.ts).
      // A deregistered worker's answer extends nothing: it says so alone.
      const clock = () =>
        answer.deregistered ? {} : { leaseAgeMs: heldMs(submitted) + 1, serverMs: heldMs(arrivedAt) };
      if (!news || !nothingToSay || !(await news.wait(Math.min(waitMs, ctx.config.maxWaitMs))))
        return void res.json({ ...answer, ...clock() });
      // Woken by a cancel, a drain or a deregistration: say which.
      const { deregistered, ...said } = await cancelsAndDrain(ctx.db, id);
      res.json(deregistered ? deregisteredAnswer(leases) : { ...said, lost: answer.lost, ...clock() });
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
    for (const job of reaped)
      ctx.log.warn(
        { jobId: job.id, workerId: id, attempt: job.runs, state: job.state },
        'worker deregistered while running the job; run recorded as lost',
      );
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
    const arrivedAt = leaseClock();
    res.json(toClaimAnswer(await heldJobs(ctx.db, id, ttl()), arrivedAt));
  });

  return r;
}

/** A worker token acts only for the worker whose key it shows; an admin token for any. */
async function mustActForWorker(
  ctx: AppContext,
  req: Request,
  res: Response,
  workerId: string,
  action: string,
): Promise<void> {
  if (actsForWorker(res, (await getWorker(ctx.db, workerId)).key_sha256, req.get('x-worker-key'))) return;
  throw new HttpError(
    403,
    'not_this_worker',
    `headers.x-worker-key: a worker token ${action} only the worker whose key it shows (its registration returned it as workerKey); an admin token ${action} any`,
  );
}
