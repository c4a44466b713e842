// Routes a worker calls under a lease. The store refuses a stale token with 409 and no change.
import { Router } from 'express';
import { appendLogsSchema, jobHeartbeatSchema, releaseBatchSchema, releaseSchema, restartSchema } from '../../protocol/schemas.js';
import type { AppContext } from '../context.js';
import { HttpError } from '../errors.js';
import { toJobView } from '../store/job-view.js';
import { appendLogs, heartbeatJob, recordRestart, releaseJob, type ReleaseInput } from '../store/leases.js';
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
    const chunks = body.chunks.map((c) => ({ offset: c.offset, stream: c.stream, data: Buffer.from(c.data, 'base64') }));
    res.json(await appendLogs(ctx.db, id, body.leaseToken, chunks));
  });

  r.post('/jobs/:id/release', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    res.json(toJobView(await release(ctx, id, parse(releaseSchema, req.body, 'body'))));
  });

  r.post('/jobs/:id/restart', async (req, res) => {
    const { id } = parse(idParam, req.params, 'params');
    const body = parse(restartSchema, req.body, 'body');
    const run = await recordRestart(ctx.db, id, body);
    ctx.log.info({ jobId: id, attempt: run, exitCode: body.exitCode, signal: body.signal }, 'service job restarted by its policy');
    res.json({ run });
  });

  // Many outcomes in one request; each is fenced on its own, and each gets its own answer.
  r.post('/releases', async (req, res) => {
    const { releases } = parse(releaseBatchSchema, req.body, 'body');
    const results = [];
    for (const { jobId, ...rel } of releases) {
      try {
        results.push({ jobId, ok: true, job: toJobView(await release(ctx, jobId, rel)) });
      } catch (err) {
        if (!(err instanceof HttpError)) throw err;
        results.push({ jobId, ok: false, error: err.code, message: err.message });
      }
    }
    res.json({ results });
  });

  return r;
}

async function release(ctx: AppContext, jobId: number, rel: ReleaseInput) {
  try {
    const job = await releaseJob(ctx.db, jobId, rel);
    ctx.metrics.released.inc({ outcome: rel.outcome });
    ctx.log.info(
      { jobId, workerId: job.worker_id, attempt: job.runs, outcome: rel.outcome, state: job.state, exitCode: rel.exitCode, signal: rel.signal },
      'job released',
    );
    return job;
  } catch (err) {
    if (err instanceof HttpError && err.code === 'stale_lease') {
      ctx.metrics.staleLease.inc();
      ctx.log.warn({ jobId }, 'release refused: stale lease token');
    }
    throw err;
  }
}
