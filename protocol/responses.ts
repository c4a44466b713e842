// The wire API's answers as zod schemas, for the OpenAPI document (server/openapi.ts); the
// TypeScript types the client reads are in types.ts. Objects are loose: a newer server may add
// a field, and a client must not refuse it.
import { z } from 'zod';
import { endReasons, jobStates } from './schemas.js';

const time = z.iso.datetime({ offset: true });
const nullable = <T extends z.ZodType>(t: T) => t.nullable();
const resources = z.looseObject({ cpu: z.number(), memoryMb: z.number(), diskMb: z.number(), slots: z.number() });

/** The body of every 4xx and 5xx the server answers (server/app.ts's error handler, errors.ts). */
export const errorBody = z.looseObject({
  error: z.string().meta({ description: 'a stable code: invalid_request, not_found, stale_lease, ...' }),
  message: z.string().meta({ description: 'what went wrong; for bad input, the field first' }),
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
});

export const jobView = z.looseObject({
  id: z.number().int(),
  queue: z.string(),
  state: z.enum(jobStates),
  command: z.array(z.string()),
  env: z.record(z.string(), z.string()),
  cwd: nullable(z.string()),
  priority: z.number().int(),
  attempts: z.number().int(),
  maxAttempts: z.number().int(),
  runAt: time,
  createdAt: time,
  startedAt: nullable(time),
  finishedAt: nullable(time),
  timeoutSeconds: nullable(z.number()),
  exitCode: nullable(z.number().int()),
  signal: nullable(z.string()),
  endReason: nullable(z.enum(endReasons)),
  error: nullable(z.string()),
  workerId: nullable(z.string()),
  leaseExpiresAt: nullable(time),
  cancelRequested: z.boolean(),
  idempotencyKey: nullable(z.string()),
  constraints: nullable(z.record(z.string(), z.unknown())),
  waitingReason: nullable(z.string()),
});

export const claimedJob = z.looseObject({
  id: z.number().int(),
  queue: z.string(),
  command: z.array(z.string()),
  env: z.record(z.string(), z.string()),
  secretEnv: z.array(z.string()),
  cwd: nullable(z.string()),
  timeoutSeconds: nullable(z.number()),
  killSignal: nullable(z.string()),
  killGraceSeconds: nullable(z.number()),
  outputCapBytes: nullable(z.number().int()),
  restart: nullable(z.record(z.string(), z.unknown())),
  leaseToken: z.uuid(),
  attempt: z.number().int(),
  leaseAgeMs: z.number().optional(),
});

export const workerView = z.looseObject({
  id: z.uuid(),
  name: z.string(),
  hostname: nullable(z.string()),
  region: nullable(z.string()),
  labels: z.record(z.string(), z.string()),
  capacity: resources,
  allocated: resources,
  queues: z.array(z.string()),
  state: z.enum(['active', 'draining', 'gone', 'deregistered', 'unresponsive']),
  lastSeenAt: time,
  registeredAt: time,
});

export const registerResponse = z.looseObject({
  id: z.uuid(),
  workerKey: z.string(),
  leaseTtlMs: z.number(),
  heartbeatIntervalMs: z.number(),
  heartbeatWaits: z.boolean().optional(),
});

export const workerHeartbeatResponse = z.looseObject({
  cancel: z.array(z.number().int()),
  lost: z.array(z.number().int()),
  drain: z.boolean(),
  deregistered: z.literal(true).optional(),
  leaseAgeMs: z.number().optional(),
  serverMs: z.number().optional(),
});

export const runView = z.looseObject({
  attempt: z.number().int(),
  workerId: nullable(z.string()),
  startedAt: time,
  endedAt: nullable(time),
  outcome: nullable(z.string()),
  endReason: nullable(z.enum(endReasons)),
  exitCode: nullable(z.number().int()),
  signal: nullable(z.string()),
  error: nullable(z.string()),
});

export const placementExplanation = z.looseObject({
  jobId: z.number().int(),
  state: z.string(),
  mode: z.enum(['pull', 'central']),
  summary: z.string(),
  bestWorkerId: nullable(z.string()),
  verdicts: z.array(
    z.looseObject({
      workerId: z.string(),
      workerName: z.string(),
      fits: z.boolean(),
      filter: z.string().optional(),
      reason: z.string().optional(),
      scores: z.record(z.string(), z.number()).optional(),
      total: z.number().optional(),
    }),
  ),
});

export const releaseResult = z.looseObject({
  jobId: z.number().int(),
  ok: z.boolean(),
  state: z.enum(jobStates).optional(),
  error: z.string().optional(),
  message: z.string().optional(),
});

export const claimAnswer = z.looseObject({
  jobs: z.array(claimedJob),
  releases: z.array(releaseResult).optional(),
  serverMs: z.number().optional(),
});

export const ok = z.looseObject({ ok: z.literal(true) });
