// The OpenAPI document, generated from the same zod schemas the routes validate with.
import { z } from 'zod';
import * as s from '../protocol/schemas.js';

const body = (schema: z.ZodType) => ({
  required: true,
  content: { 'application/json': { schema: z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) } },
});
const ok = (description: string) => ({ description });
const op = (summary: string, requestBody?: z.ZodType) => ({
  summary,
  ...(requestBody ? { requestBody: body(requestBody) } : {}),
  responses: {
    200: ok('OK'),
    400: ok('Invalid input; the message names the field'),
    404: ok('Not found'),
    409: ok('Conflict: stale lease, taken, or finished'),
  },
});

let cached: object | undefined;

export function openApiDocument(): object {
  cached ??= {
    openapi: '3.1.0',
    info: { title: 'Skipjack', version: '0.1.0', description: 'Postgres-backed job orchestrator' },
    paths: {
      '/jobs': {
        post: op('Enqueue one job, or a batch as {jobs: [...]}', z.union([s.enqueueJobSchema, s.enqueueBatchSchema])),
        get: op('List jobs (state, queue, cursor, limit), or with available&worker=ID the jobs that worker may claim'),
      },
      '/jobs/{id}': { get: op('A job') },
      '/jobs/{id}/attempts': { get: op('Every run of a job: worker, times, outcome, exit code, signal') },
      '/jobs/{id}/placement': {
        get: op("Every live worker's verdict for the job: failing filter and reason, or scores and total"),
      },
      '/jobs/{id}/restart': {
        post: op('A service job was restarted by its policy: close this run, open the next', s.restartSchema),
      },
      '/jobs/{id}/cancel': { post: op('Cancel: a pending job at once, a running one through its worker') },
      '/jobs/{id}/logs': {
        get: op('Output as text/plain; ?attempt=N for one run, ?follow=1 to stream until the job ends'),
        post: op('Append output chunks under a lease (idempotent by byte offset)', s.appendLogsSchema),
      },
      '/jobs/{id}/claim': { post: op('Claim one job (409 when taken)', s.claimOneSchema) },
      '/jobs/{id}/heartbeat': { post: op('Extend a lease', s.jobHeartbeatSchema) },
      '/jobs/{id}/release': { post: op('End a run with its outcome', s.releaseSchema) },
      '/releases': { post: op('Release many runs in one request', s.releaseBatchSchema) },
      '/claims': { post: op('Claim up to max jobs, long-polling up to waitMs', s.claimSchema) },
      '/workers': {
        post: op('Register a worker', s.registerWorkerSchema),
        get: op('Live workers with their allocation'),
      },
      '/workers/{id}': {
        get: op('A worker'),
        delete: op(
          'Deregister, for good: leases it holds are taken back now, and its heartbeats are told to stop. A worker token needs the X-Worker-Key header with the key its registration returned',
        ),
      },
      '/workers/{id}/heartbeat': { post: op('Worker liveness and lease renewal', s.workerHeartbeatSchema) },
      '/workers/{id}/drain': { post: op('Ask a worker to stop claiming and finish its jobs') },
      '/workers/{id}/leases': {
        get: op('The jobs the worker holds leases on, as a claim answers with them (X-Worker-Key with a worker token)'),
      },
      '/workers/{id}/end-poll': { post: op("Answer the worker's waiting long-poll now, with what it has") },
      '/healthz': { get: op('Process is up') },
      '/readyz': { get: op('Database reachable') },
      '/metrics': { get: op('Prometheus metrics') },
    },
  };
  return cached;
}
