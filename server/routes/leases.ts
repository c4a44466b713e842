// Routes a worker calls under a lease. The store refuses a stale token with 409 and no change.
import { Router } from 'express';
import {
  appendLogsSchema,
  jobHeartbeatSchema,
  releaseBatchSchema,
  releaseSchema,
  restartSchema,
} from '../../protocol/schemas.js';
import type { AppContext } from '../context.js';
import { answerReleases, release } from '../releases.js';
import type { Db } from '../db.js';
import { staleLease } from '../errors.js';
import { toJobView } from '../store/job-view.js';
import { getJob } from '../store/jobs.js';
import { appendLogs, heartbeatJob, recordRestart, releaseJobs } from '../store/leases.js';
import { idParam, parse } from '../validate.js';

export function leaseRoutes(ctx: AppContext): Router {
  const r = Router();

  r.post('/jobs/:id/heartbeat', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    const { leaseToken } = parse(jobHeartbeatSchema, req.body, 'body');
    res.json(await heartbeatJob(ctx.db, id, leaseToken, ctx.config.leaseTtlMs));
  });

  r.post('/jobs/:id/logs', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    const body = parse(appendLogsSchema, req.body, 'body');
    const chunks = body.chunks.map((c) => ({
      offset: c.offset,
      stream: c.stream,
      data: Buffer.from(c.data, 'base64'),
    }));
    res.json(await appendLogs(ctx.db, id, body.leaseToken, chunks));
  });

  r.post('/jobs/:id/release', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    const input = [{ jobId: id, ...parse(releaseSchema, req.body, 'body') }];
    // One transaction: the answer is the job as this release left it, before anyone claims it again.
    const { done, job } = await ctx.db.transaction().execute(async (trx) => {
      const released = await releaseJobs(trx as unknown as Db, input);
      return { done: released, job: released.has(id) ? await getJob(trx as unknown as Db, id) : null };
    });
    const [result] = answerReleases(ctx, input, done);
    res.locals.staleCounted = true;
    if (!result.ok || !job) throw staleLease(id);
    res.json(toJobView(job));
  });

  r.post('/jobs/:id/restart', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    const body = parse(restartSchema, req.body, 'body');
    const run = await recordRestart(ctx.db, id, body);
    ctx.log.info(
      { jobId: id, attempt: run, exitCode: body.exitCode, signal: body.signal },
      'service job restarted by its policy',
    );
    res.json({ run });
  });

  // Many outcomes in one request and one statement; each is fenced on its own and answered on its own.
  r.post('/releases', async (req, res) => {
    const { releases } = parse(releaseBatchSchema, req.body, 'body');
    res.json({ results: await release(ctx, releases) });
  });

  return r;
}
