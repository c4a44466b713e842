// Deploy-tool and operator routes: enqueue, read, list, cancel, logs.
import { Router } from 'express';
import pg from 'pg';
import {
  enqueueBatchSchema,
  enqueueJobSchema,
  type EnqueueJobParsed,
  listJobsQuerySchema,
  logsQuerySchema,
} from '../../protocol/schemas.js';
import type { AppContext } from '../context.js';
import { claimsInOneStatement } from '../store/claims.js';
import { insertThenClaim } from '../store/hand-off.js';
import type { ClaimRow, JobRow } from '../db.js';
import { fitsWhenIdle, queueFilter } from '../../placement/index.js';
import { toJobView, toRunView } from '../store/job-view.js';
import { cancelJob, enqueueJobs, fitsOneStatement, getJob, listAttempts, listJobs } from '../store/jobs.js';
import { followLogs, sendLogs } from './log-stream.js';
import { idParam, invalidRequest, parse } from '../validate.js';
import { HttpError } from '../errors.js';
import { refusalLabel } from '../metrics/labels.js';
import { enqueueVerdicts, explainPlacement, waitingReason, waitingReasons } from '../placement/explain.js';
import { toPlacementJob } from '../placement/rows.js';

export function jobRoutes(ctx: AppContext): Router {
  const r = Router();

  r.post('/jobs', async (req, res) => {
    const body = req.body ?? {};
    const batch = Array.isArray(body.jobs);
    const header = req.get('Idempotency-Key');
    // One key for many jobs cannot say which it stands for: each job of a batch carries its own.
    if (batch && header)
      throw invalidRequest([
        { path: 'headers.idempotency-key', message: 'not for a batch: give each job its own idempotencyKey' },
      ]);
    const jobs = batch
      ? parse(enqueueBatchSchema, body, 'body').jobs
      : [parse(enqueueJobSchema, header && !body.idempotencyKey ? { ...body, idempotencyKey: header } : body, 'body')];
    // A sleeping worker that could run the one job now could run it idle: nothing to refuse or explain.
    const sleeperForOne = jobs.length === 1 ? await takeSleepingClaim(ctx, jobs) : null;
    const waiting = sleeperForOne ? new Map<number, string>() : await checkPlaceable(ctx, jobs, batch);
    const results = await enqueueAndHandOff(
      ctx,
      jobs,
      sleeperForOne ?? (jobs.length > 1 ? await takeSleepingClaim(ctx, jobs) : null),
    );
    for (const { job, created } of results) {
      if (created) ctx.metrics.enqueued.inc({ queue: ctx.metrics.queues.label(job.queue) });
      ctx.log.info(
        { jobId: job.id, queue: job.queue, created },
        created ? 'job enqueued' : 'idempotent repeat: returning the existing job',
      );
    }
    const anyCreated = results.some((x) => x.created);
    const status = anyCreated ? 201 : 200;
    const view = ({ job }: { job: JobRow }, index: number) => {
      const v = toJobView(job);
      if (v.state === 'pending' && waiting.has(index)) v.waitingReason = waiting.get(index)!;
      return v;
    };
    if (batch) return void res.status(status).json({ jobs: results.map(view) });
    res.status(status).json(view(results[0], 0));
  });

  // The list; GET /jobs?available&worker=ID, the poll, is a claim route (routes/claims.ts).
  r.get('/jobs', async (req, res) => {
    const q = parse(listJobsQuerySchema, req.query, 'query');
    const page = await listJobs(ctx.db, q);
    const waiting = await waitingReasons(ctx, page.jobs);
    const jobs = page.jobs.map((job) => ({ ...toJobView(job), waitingReason: waiting.get(job.id) ?? null }));
    res.json({ jobs, nextCursor: page.nextCursor });
  });

  r.get('/jobs/:id', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    const job = await getJob(ctx.db, id);
    const view = toJobView(job);
    if (job.state === 'pending') view.waitingReason = await waitingReason(ctx, job);
    res.json(view);
  });

  r.get('/jobs/:id/placement', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    res.json(await explainPlacement(ctx, await getJob(ctx.db, id)));
  });

  r.get('/jobs/:id/attempts', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    await getJob(ctx.db, id);
    res.json({ attempts: (await listAttempts(ctx.db, id)).map(toRunView) });
  });

  r.post('/jobs/:id/cancel', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    const job = await cancelJob(ctx.db, id);
    ctx.log.info(
      { jobId: id, state: job.state },
      job.state === 'cancelled' ? 'job cancelled' : 'cancel requested of a running job',
    );
    res.json(toJobView(job));
  });

  r.get('/jobs/:id/logs', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    const q = parse(logsQuerySchema, req.query, 'query');
    await getJob(ctx.db, id);
    res.type('text/plain');
    if (q.follow === '1' || q.follow === 'true') return followLogs(ctx, id, res);
    await sendLogs(ctx, id, res, q.attempt);
  });

  return r;
}

/** The jobs as placement sees them, numbered by their place in the request. */
function asPlacementJobs(jobs: EnqueueJobParsed[]) {
  return jobs.map((job, index) =>
    toPlacementJob({
      id: index + 1,
      queue: job.queue,
      priority: job.priority,
      created_at: new Date(),
      constraints: job.constraints ?? null,
      preferences: job.preferences ?? null,
    }),
  );
}

/**
 * A job that no known worker could run even when idle is refused (422) with the grouped reasons,
 * unless the client accepts the wait with allowUnplaceable. A batch is refused whole. Otherwise,
 * by the job's place in the request, why a checked job will wait: no known worker serves its queue.
 */
async function checkPlaceable(ctx: AppContext, jobs: EnqueueJobParsed[], batch: boolean): Promise<Map<number, string>> {
  const checked = jobs.map((job, index) => ({ job, index })).filter(({ job }) => !job.allowUnplaceable);
  if (checked.length === 0) return new Map();
  const verdicts = await enqueueVerdicts(ctx, asPlacementJobs(checked.map(({ job }) => job)));
  const refused = checked.flatMap(({ index }, i) =>
    verdicts[i].refused ? [{ index, reason: verdicts[i].refused! }] : [],
  );
  for (const v of verdicts)
    if (v.refused) ctx.metrics.placementRefusals.inc({ reason: refusalLabel(v.refusedBy ?? '') });
  if (refused.length === 0)
    return new Map(checked.flatMap(({ index }, i) => (verdicts[i].waiting ? [[index, verdicts[i].waiting!]] : [])));
  const where = (index: number) => (batch ? `body.jobs.${index}` : 'body');
  throw new HttpError(
    422,
    'unplaceable',
    `${where(refused[0].index)}: no known worker could ever run this job: ${refused[0].reason}`,
    {
      unplaceable: refused.map((r) => ({ path: where(r.index), reasons: r.reason })),
      hint: 'set allowUnplaceable: true to enqueue it anyway and wait for such a worker',
    },
  );
}

/**
 * Inserts the jobs; when a long-poll asleep in this process belongs to a worker that could run one
 * of them, that worker's claim runs in the same statement and its answer goes straight to the
 * long-poll. The claim is the usual one, so queue order, capacity and constraints hold as ever;
 * one job goes in already started only where that claim would have started it (migration 013).
 * Should PostgreSQL refuse the combined statement, nothing of it stands, and the jobs are inserted
 * alone: an enqueue does not fail for the sake of a hand-off.
 */
async function enqueueAndHandOff(ctx: AppContext, jobs: EnqueueJobParsed[], handOff: SleepingClaimTaken | null) {
  if (!handOff) return enqueueJobs(ctx.db, jobs);
  const { claim, deliver } = handOff;
  let claimed: ClaimRow[] = [];
  let committed = false;
  try {
    return await enqueueJobs(ctx.db, jobs, async (rows) => {
      // One job's enqueue is what a waiting worker waits for; a batch's text varies with its size.
      const prepared = jobs.length === 1 ? ctx.statements : undefined;
      const out = await insertThenClaim(ctx.db, rows, claim.workerId, {
        max: claim.max,
        leaseTtlMs: ctx.config.leaseTtlMs,
        prepared,
      });
      committed = true;
      claimed = out.claimed;
      ctx.metrics.handedOff.inc(claimed.length);
      if (claimed.length > 0)
        ctx.log.debug(
          { workerId: claim.workerId, jobIds: claimed.map((j) => j.id) },
          'enqueue claimed for a sleeping long-poll',
        );
      return out.inserted;
    });
  } catch (err) {
    // Retry alone only when PostgreSQL refused the statement, so surely nothing of it committed.
    if (committed || !refusedByPostgres(err)) throw err;
    ctx.log.warn(
      { err: (err as Error).message, workerId: claim.workerId },
      'hand-off to a sleeping long-poll failed; enqueueing without it',
    );
    return await enqueueJobs(ctx.db, jobs);
  } finally {
    deliver(claimed);
    // The worker's answer goes out before this one: its long-poll resumes and writes in the
    // microtasks this turn runs, ahead of the next phase. A job reaches its worker 0.1 ms sooner
    // (bench/ latency, interleaved), and the enqueue answers no later than a moment after.
    if (claimed.length > 0) await new Promise((resolve) => setImmediate(resolve));
  }
}

/** An error PostgreSQL answered with, as opposed to a connection lost mid-statement. */
const refusedByPostgres = (err: unknown) => err instanceof pg.DatabaseError && !err.code?.startsWith('08');

type SleepingClaimTaken = NonNullable<Awaited<ReturnType<typeof takeSleepingClaim>>>;

/** The longest-asleep claim whose worker could run one of these jobs now, if claims are one statement. */
async function takeSleepingClaim(ctx: AppContext, jobs: EnqueueJobParsed[]) {
  if (!fitsOneStatement(jobs) || ctx.sleepingClaims.size === 0 || !claimsInOneStatement(ctx.placement)) return null;
  const now = Date.now();
  const due = asPlacementJobs(jobs.filter((j) => !j.runAt || Date.parse(j.runAt) <= now));
  if (due.length === 0) return null;
  const known = new Map((await ctx.knownWorkers.get()).map((w) => [w.id, w]));
  return ctx.sleepingClaims.take((workerId) => {
    const w = known.get(workerId);
    return (
      !!w &&
      w.state === 'active' &&
      due.some((j) => queueFilter.check(j, w, { now }) === null && fitsWhenIdle(j, w, { now }) === null)
    );
  });
}
