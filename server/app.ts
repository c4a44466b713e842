// The Express app: routes, JSON parsing, and the one place errors become HTTP answers.
import express, { type NextFunction, type Request, type Response } from 'express';
import { sql } from 'kysely';
import type { AppContext } from './context.js';
import { authenticate } from './auth.js';
import { HttpError } from './errors.js';
import { plainJsonBody } from './json-body.js';
import { httpMetrics } from './metrics/http.js';
import { openApiDocument } from './openapi/index.js';
import { claimRoutes } from './routes/claims.js';
import { jobRoutes } from './routes/jobs.js';
import { leaseRoutes } from './routes/leases.js';
import { scheduleRoutes } from './routes/schedules.js';
import { workerRoutes } from './routes/workers.js';
import { dashboardPage } from './dashboard.js';

const BODY_LIMIT_BYTES = 32 * 1024 * 1024;

export function createApp(ctx: AppContext) {
  const app = express();
  app.disable('x-powered-by');
  // Express hashes every answer for an ETag, a claim's thousand jobs included; no client of this API revalidates.
  app.disable('etag');
  app.use(httpMetrics(ctx.metrics));
  app.use(authenticate(ctx.config.tokens));
  app.use(plainJsonBody(BODY_LIMIT_BYTES));
  app.use(express.json({ limit: BODY_LIMIT_BYTES }));
  app.use(refuseOtherBodies);
  // Before the job routes: GET /jobs is the poll when it names a worker, else the job list.
  app.use(claimRoutes(ctx));
  app.use(jobRoutes(ctx));
  app.use(workerRoutes(ctx));
  app.use(leaseRoutes(ctx));
  app.use(scheduleRoutes(ctx));
  app.get('/healthz', (_req, res) => void res.json({ ok: true }));
  app.get('/readyz', async (_req, res) => {
    await sql`SELECT 1`.execute(ctx.db);
    res.json({ ok: true });
  });
  app.get('/metrics', async (_req, res) => {
    res.type(ctx.metrics.registry.contentType).send(await ctx.metrics.render());
  });
  app.get('/openapi.json', (_req, res) => void res.json(openApiDocument()));
  app.get('/', (_req, res) => void res.type('html').send(dashboardPage()));
  app.use((req, res, next) => {
    res.locals.unmatched = true;
    next(new HttpError(404, 'not_found', `no route ${req.method} ${req.path}`));
  });
  app.use(errorHandler(ctx));
  return app;
}

/** express.json() reads only JSON: a body of another type would reach a route as no body at all. */
function refuseOtherBodies(req: Request, _res: Response, next: NextFunction) {
  const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  if (req.body !== undefined || !hasBody) return next();
  next(
    new HttpError(
      415,
      'unsupported_media_type',
      `content-type: ${req.get('content-type') ?? 'none given'}; the API reads application/json`,
    ),
  );
}

function errorHandler(ctx: AppContext) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const answer = toHttpError(err);
    // Refusals the release answers counted already (releases.ts) are not counted twice.
    if (answer.code === 'stale_lease' && !res.locals.staleCounted) ctx.metrics.staleLease.inc();
    if (answer.status >= 500) ctx.log.error({ err, method: req.method, path: req.path }, 'request failed');
    if (res.headersSent) return void res.end();
    res.status(answer.status).json({ error: answer.code, message: answer.message, ...answer.details });
  };
}

// Connection refused or reset, PostgreSQL shutting down or starting up: the client should retry.
const UNAVAILABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08006',
]);
function databaseUnavailable(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: string; message?: string };
  // pg's pool, out of time to open a connection, says so in words only.
  if (message === 'timeout exceeded when trying to connect') return true;
  return typeof code === 'string' && UNAVAILABLE.has(code);
}

// express.json() takes only an object or an array at the top, and calls anything else (a bare
// null, number or string) invalid: valid JSON, but not what any route reads.
function notJsonObject(err: { body?: unknown; message: string }): HttpError {
  try {
    const value: unknown = JSON.parse(String(err.body));
    return new HttpError(
      400,
      'invalid_request',
      `body: expected a JSON object, got ${value === null ? 'null' : typeof value}`,
    );
  } catch {
    return new HttpError(400, 'invalid_json', `body: not valid JSON (${err.message})`);
  }
}

// body-parser marks its own failures with a status and a type; keep them 4xx with a clear word.
function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  const e = err as { status?: number; type?: string; message?: string };
  if (e?.type === 'entity.parse.failed') return notJsonObject(err as { body?: unknown; message: string });
  if (e?.type === 'entity.too.large') return new HttpError(413, 'too_large', 'body: larger than the 32 MB limit');
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500)
    return new HttpError(e.status, 'bad_request', e.message ?? 'bad request');
  if ((err as { code?: string })?.code === '57014')
    return new HttpError(503, 'database_timeout', 'a database statement ran past its timeout; retry shortly');
  if (databaseUnavailable(err))
    return new HttpError(503, 'database_unavailable', 'the database cannot be reached; retry shortly');
  return new HttpError(500, 'internal', 'internal error; the server log has the details');
}
