// Every route the app serves, with what it reads and answers, for the OpenAPI document. A new
// route goes here too: tests/integration/openapi.test.ts walks the app's router and fails on a
// route this table lacks.
import { z } from 'zod';
import * as r from '../../protocol/responses.js';
import * as s from '../../protocol/schemas.js';
import { createScheduleSchema, scheduleParamSchema, scheduleViewSchema } from '../../protocol/schedules.js';
import { idParam, workerParam } from '../validate.js';

export interface Operation {
  method: 'get' | 'post' | 'delete';
  /** As Express writes it: /jobs/:id. */
  path: string;
  summary: string;
  params?: z.ZodObject;
  query?: z.ZodObject;
  body?: z.ZodType;
  /** The answer when all goes well; `schema` absent for a body that is not JSON. */
  ok: { status: number; description: string; schema?: z.ZodType; contentType?: string };
  /** Errors beyond those every operation of its kind has (400 for input, 404 for a path id). */
  errors?: number[];
  headers?: { name: string; description: string }[];
}

const jobId = idParam;
const workerId = workerParam;
const workerKey = {
  name: 'X-Worker-Key',
  description: 'with a worker token: the key the registration returned (an admin token needs none)',
};

export const operations: Operation[] = [
  {
    method: 'post',
    path: '/jobs',
    summary: 'Enqueue one job, or a batch as {jobs: [...]}; 201, or 200 for an idempotent repeat',
    body: z.union([s.enqueueJobSchema, s.enqueueBatchSchema]),
    ok: {
      status: 201,
      description: 'The job, or {jobs} for a batch',
      schema: z.union([r.jobView, z.object({ jobs: z.array(r.jobView) })]),
    },
    errors: [422],
    headers: [{ name: 'Idempotency-Key', description: "one job's idempotency key (not for a batch)" }],
  },
  {
    method: 'get',
    path: '/jobs',
    summary:
      'List jobs newest first (state, queue, cursor, limit); with available&worker=ID, the jobs that worker may claim',
    query: s.listJobsQuerySchema.extend(s.availableQuerySchema.partial().shape),
    ok: {
      status: 200,
      description: 'A page of jobs; nextCursor for the next page (the list only)',
      schema: z.object({ jobs: z.array(r.jobView), nextCursor: z.number().int().nullable().optional() }),
    },
  },
  {
    method: 'get',
    path: '/jobs/:id',
    summary: 'A job',
    params: jobId,
    ok: { status: 200, description: 'The job', schema: r.jobView },
  },
  {
    method: 'get',
    path: '/jobs/:id/attempts',
    summary: 'Every run of a job: worker, times, outcome, exit code, signal',
    params: jobId,
    ok: { status: 200, description: 'Its runs', schema: z.object({ attempts: z.array(r.runView) }) },
  },
  {
    method: 'get',
    path: '/jobs/:id/placement',
    summary: "Every live worker's verdict on the job: failing filter and reason, or scores and total",
    params: jobId,
    ok: { status: 200, description: 'The verdicts', schema: r.placementExplanation },
  },
  {
    method: 'post',
    path: '/jobs/:id/restart',
    summary: 'A service job was restarted by its policy: close this run, open the next',
    params: jobId,
    body: s.restartSchema,
    ok: { status: 200, description: 'The new run number', schema: z.object({ run: z.number().int() }) },
    errors: [409],
  },
  {
    method: 'post',
    path: '/jobs/:id/cancel',
    summary: 'Cancel: a pending job at once, a running one through its worker',
    params: jobId,
    ok: { status: 200, description: 'The job', schema: r.jobView },
    errors: [409],
  },
  {
    method: 'get',
    path: '/jobs/:id/logs',
    summary: 'Output as text; ?attempt=N for one run, ?follow=1 to stream until the job ends',
    params: jobId,
    query: s.logsQuerySchema,
    ok: { status: 200, description: 'The output', contentType: 'text/plain' },
  },
  {
    method: 'post',
    path: '/jobs/:id/logs',
    summary: 'Append output chunks under a lease (idempotent by byte offset)',
    params: jobId,
    body: s.appendLogsSchema,
    ok: {
      status: 200,
      description: 'Where the output ends',
      schema: z.object({ end: z.number(), stored: z.number() }),
    },
    errors: [409],
  },
  {
    method: 'post',
    path: '/jobs/:id/claim',
    summary: 'Claim one job (409 when taken)',
    params: jobId,
    body: s.claimOneSchema,
    ok: { status: 200, description: 'The job, with its lease', schema: r.claimedJob },
    errors: [409],
  },
  {
    method: 'post',
    path: '/jobs/:id/heartbeat',
    summary: "Extend one job's lease",
    params: jobId,
    body: s.jobHeartbeatSchema,
    ok: {
      status: 200,
      description: 'The new expiry',
      schema: z.object({ leaseExpiresAt: z.iso.datetime({ offset: true }), cancelRequested: z.boolean() }),
    },
    errors: [409],
  },
  {
    method: 'post',
    path: '/jobs/:id/release',
    summary: 'End a run with its outcome',
    params: jobId,
    body: s.releaseSchema,
    ok: { status: 200, description: 'The job as the release left it', schema: r.jobView },
    errors: [409],
  },
  {
    method: 'post',
    path: '/releases',
    summary: 'Release many runs in one request; each is answered on its own',
    body: s.releaseBatchSchema,
    ok: { status: 200, description: 'One result per release', schema: z.object({ results: z.array(r.releaseResult) }) },
  },
  {
    method: 'post',
    path: '/claims',
    summary: 'Release finished runs, then claim up to max jobs, long-polling up to waitMs',
    body: s.claimSchema,
    ok: { status: 200, description: 'The jobs claimed, and the releases answered', schema: r.claimAnswer },
    errors: [404],
  },
  {
    method: 'post',
    path: '/workers',
    summary: 'Register a worker; the answer carries its key, once',
    body: s.registerWorkerSchema,
    ok: { status: 201, description: 'Its id and key', schema: r.registerResponse },
  },
  {
    method: 'get',
    path: '/workers',
    summary: 'Live workers with their allocation',
    ok: { status: 200, description: 'The workers', schema: z.object({ workers: z.array(r.workerView) }) },
  },
  {
    method: 'get',
    path: '/workers/:id',
    summary: 'A worker',
    params: workerId,
    ok: { status: 200, description: 'The worker', schema: r.workerView },
  },
  {
    method: 'delete',
    path: '/workers/:id',
    summary: 'Deregister, for good: leases it holds are taken back now, and its heartbeats are told to stop',
    params: workerId,
    ok: { status: 200, description: 'The worker', schema: r.workerView },
    headers: [workerKey],
  },
  {
    method: 'post',
    path: '/workers/:id/heartbeat',
    summary: 'Worker liveness and lease renewal; hears of cancels and drains',
    params: workerId,
    body: s.workerHeartbeatSchema,
    ok: { status: 200, description: 'What the worker must act on', schema: r.workerHeartbeatResponse },
  },
  {
    method: 'post',
    path: '/workers/:id/drain',
    summary: 'Ask a worker to stop claiming and finish its jobs',
    params: workerId,
    ok: { status: 200, description: 'The worker', schema: r.workerView },
    errors: [409],
  },
  {
    method: 'get',
    path: '/workers/:id/leases',
    summary: 'The jobs the worker holds leases on, as a claim answers with them',
    params: workerId,
    ok: { status: 200, description: 'Its jobs', schema: r.claimAnswer },
    headers: [workerKey],
  },
  {
    method: 'post',
    path: '/workers/:id/end-poll',
    summary: "Answer the worker's waiting long-poll now, with what it has",
    params: workerId,
    ok: { status: 204, description: 'Done' },
    headers: [workerKey],
  },
  {
    method: 'post',
    path: '/schedules',
    summary: 'Save a cron schedule (add, or replace one of the same name); each tick enqueues its job once',
    body: createScheduleSchema,
    ok: { status: 201, description: 'The schedule (200 when it replaced one)', schema: scheduleViewSchema },
  },
  {
    method: 'get',
    path: '/schedules',
    summary: 'Every schedule, with its next tick and its last job',
    ok: { status: 200, description: 'The schedules', schema: z.object({ schedules: z.array(scheduleViewSchema) }) },
  },
  {
    method: 'delete',
    path: '/schedules/:name',
    summary: 'Remove a schedule; the jobs it enqueued stay',
    params: scheduleParamSchema,
    ok: { status: 204, description: 'Removed' },
    errors: [404],
  },
  {
    method: 'get',
    path: '/healthz',
    summary: 'The process is up',
    ok: { status: 200, description: 'Up', schema: r.ok },
  },
  {
    method: 'get',
    path: '/readyz',
    summary: 'The database answers',
    ok: { status: 200, description: 'Ready', schema: r.ok },
  },
  {
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics (docs/metrics.md)',
    ok: { status: 200, description: 'The exposition text', contentType: 'text/plain' },
  },
  {
    method: 'get',
    path: '/openapi.json',
    summary: 'This document',
    ok: { status: 200, description: 'OpenAPI 3.1', schema: z.record(z.string(), z.unknown()) },
  },
  {
    method: 'get',
    path: '/',
    summary: 'The dashboard',
    ok: { status: 200, description: 'A page', contentType: 'text/html' },
  },
];
