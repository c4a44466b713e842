// The wire API's request shapes. Server, worker and CLI share these so they cannot drift.
import { constants } from 'node:os';
import { z } from 'zod';
import { endReasons, jobStates } from './states.js';

export { endReasons, jobStates, terminalStates, type EndReason, type JobState } from './states.js';

// PostgreSQL text cannot hold a NUL byte; refusing it here keeps it a 400, not a 500.
// eslint-disable-next-line no-control-regex -- a NUL is exactly what this refuses (PostgreSQL text cannot hold one)
const text = () => z.string().regex(/^[^\u0000]*$/, 'must not contain a NUL byte');
const name = text().min(1).max(200);
const int32 = z
  .number()
  .int()
  .min(-(2 ** 31))
  .max(2 ** 31 - 1);
const signalName = z
  .string()
  .refine((s) => s.startsWith('SIG') && s in constants.signals, 'must be a signal name such as SIGTERM');
/** A signal a process ended by, as a worker reports it. */
const reportedSignal = text().max(20);
// Stored as real: a positive value below its smallest normal (about 1e-38) fails in PostgreSQL.
const seconds = (max: number) =>
  z
    .number()
    .max(max)
    .refine((v) => v === 0 || v >= 0.001, 'must be 0 or at least 0.001');
const positiveSeconds = (max: number) => z.number().min(0.001).max(max);
const queueName = z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/, 'a queue name is 1-64 of a-z 0-9 _ . -');
/** A refinement naming each item whose key (where it has one) an earlier item already had. */
function eachOnce<T>(keyOf: (item: T) => unknown, field: string, message: string) {
  return (items: T[], ctx: z.RefinementCtx<T[]>) => {
    const seen = new Set<unknown>();
    items.forEach((item, i) => {
      const key = keyOf(item);
      if (key === undefined) return;
      if (seen.has(key)) ctx.addIssue({ code: 'custom', path: [i, field], message });
      seen.add(key);
    });
  };
}
const labelValue = z.union([text().min(1).max(200), z.array(text().min(1).max(200)).min(1).max(50)]);

export const resourcesSchema = z.strictObject({
  cpu: z.number().int().min(0).max(10_000_000).optional(),
  memoryMb: z.number().int().min(0).max(100_000_000).optional(),
  diskMb: z.number().int().min(0).max(1_000_000_000).optional(),
});

export const constraintsSchema = z.strictObject({
  region: z.union([name, z.array(name).min(1).max(50)]).optional(),
  resources: resourcesSchema.optional(),
  labels: z.record(name, labelValue).optional(),
});

export const preferenceSchema = z.strictObject({
  labels: z.record(name, labelValue),
  weight: z.number().int().min(1).max(100).default(1),
});

export const restartPolicySchema = z.strictObject({
  policy: z.enum(['never', 'on-failure', 'always']).default('never'),
  maxRestarts: z.number().int().min(0).max(1000).default(3),
  windowSeconds: z.number().positive().max(86_400).default(60),
  delaySeconds: z.number().min(0).max(3600).default(1),
  backoff: z.number().min(1).max(10).default(2),
});

/** What one job's command and env may take: execve() refuses more than 2 MiB for both. */
export const MAX_PROGRAM_BYTES = 1024 * 1024;

/** The bytes execve() would be given: each argument and NAME=value, with its NUL. */
function programBytes(job: { command: string[]; env?: Record<string, string> }): number {
  let bytes = 0;
  for (const arg of job.command) bytes += Buffer.byteLength(arg) + 1;
  for (const [key, value] of Object.entries(job.env ?? {}))
    bytes += Buffer.byteLength(key) + Buffer.byteLength(value) + 2;
  return bytes;
}

export const enqueueJobSchema = z
  .strictObject({
    command: z.array(text().max(100_000)).min(1, 'must name a program').max(10_000),
    env: z
      .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'env names are letters, digits and _'), text().max(100_000))
      .optional(),
    secretEnv: z.array(text().max(200)).max(1000).optional(),
    cwd: text().min(1).max(4096).optional(),
    queue: queueName.default('default'),
    priority: z.number().int().min(-1000).max(1000).default(0),
    runAt: z.iso
      .datetime({ offset: true })
      .refine((v) => /^(19[7-9]\d|[2-9]\d{3})-/.test(v), 'must be a time between 1970 and 9999')
      .optional(),
    maxAttempts: z.number().int().min(1).max(100).default(3),
    retryBackoffSeconds: seconds(3600).default(2),
    timeoutSeconds: positiveSeconds(7 * 86_400).optional(),
    killSignal: signalName.optional(),
    killGraceSeconds: seconds(3600).optional(),
    outputCapBytes: z
      .number()
      .int()
      .min(1024)
      .max(1024 ** 3)
      .optional(),
    idempotencyKey: text().min(1).max(200).optional(),
    constraints: constraintsSchema.optional(),
    preferences: z.array(preferenceSchema).max(20).optional(),
    restart: restartPolicySchema.optional(),
    placementDeadlineSeconds: z
      .number()
      .positive()
      .max(30 * 86_400)
      .optional(),
    allowUnplaceable: z.boolean().optional(),
  })
  .superRefine((job, ctx) => {
    const bytes = programBytes(job);
    if (bytes > MAX_PROGRAM_BYTES)
      ctx.addIssue({
        code: 'custom',
        path: ['env' in job && job.env ? 'env' : 'command'],
        message: `command and env together must be at most ${MAX_PROGRAM_BYTES} bytes (they are ${bytes}): a program gets 2 MiB for both at most`,
      });
  });
export type EnqueueJob = z.input<typeof enqueueJobSchema>;
export type EnqueueJobParsed = z.output<typeof enqueueJobSchema>;

export const enqueueBatchSchema = z.strictObject({
  // A key twice in one batch would store the first job and answer it for the second.
  jobs: z
    .array(enqueueJobSchema)
    .min(1)
    .max(10_000)
    .superRefine(
      eachOnce((j) => j.idempotencyKey, 'idempotencyKey', 'this key is already used by another job of the batch'),
    ),
});

export const listJobsQuerySchema = z.strictObject({
  state: z.enum(jobStates).optional(),
  queue: text().max(64).optional(),
  cursor: z.coerce.number().int().positive().optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

/** GET /jobs/:id/logs: one run's output, or follow the job's until it ends. */
export const logsQuerySchema = z.strictObject({
  attempt: z.coerce
    .number()
    .int()
    .positive()
    .max(2 ** 31 - 1)
    .optional(),
  follow: z.enum(['0', '1', 'true', 'false']).optional(),
});

export const availableQuerySchema = z.strictObject({
  available: z.string().optional(),
  worker: z.uuid(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

export const capacitySchema = z.strictObject({
  cpu: z.number().int().min(0).max(10_000_000).default(1000),
  memoryMb: z.number().int().min(0).max(100_000_000).default(1024),
  diskMb: z.number().int().min(0).max(1_000_000_000).default(10_240),
  slots: z.number().int().min(1).max(10_000).default(4),
});

export const registerWorkerSchema = z.strictObject({
  name: name,
  hostname: text().max(255).optional(),
  region: name.optional(),
  labels: z.record(name, text().min(1).max(200)).default({}),
  capacity: capacitySchema.default({ cpu: 1000, memoryMb: 1024, diskMb: 10_240, slots: 4 }),
  // Each once: a queue named twice would be read twice by every claim.
  queues: z
    .array(queueName)
    .min(1)
    .max(100)
    .default(['default'])
    .transform((qs) => [...new Set(qs)]),
  version: text().max(100).optional(),
});
export type RegisterWorker = z.input<typeof registerWorkerSchema>;

const leaseSchema = z.strictObject({ jobId: z.number().int().positive(), leaseToken: z.uuid() });

export const workerHeartbeatSchema = z.strictObject({
  leases: z.array(leaseSchema).max(10_000).default([]),
  /** Hold the answer up to this long while there is nothing to say (no cancel, no drain); the server caps it. */
  waitMs: z.number().int().min(0).default(0),
});

export const claimOneSchema = z.strictObject({ workerId: z.uuid() });

export const jobHeartbeatSchema = z.strictObject({ leaseToken: z.uuid() });

/** A job's output past this (or its outputCapBytes) is cut by its worker, and refused by the server. */
export const DEFAULT_OUTPUT_CAP_BYTES = 64 * 1024 * 1024;

export const logChunkSchema = z.strictObject({
  offset: z.number().int().min(0),
  stream: z.enum(['stdout', 'stderr', 'system']).default('stdout'),
  /** Base64 of the raw bytes, so output that is not UTF-8 arrives byte-exact. */
  data: z.base64(),
});
export const appendLogsSchema = z.strictObject({
  leaseToken: z.uuid(),
  chunks: z.array(logChunkSchema).min(1).max(10_000),
});
export type LogChunk = z.input<typeof logChunkSchema>;

export const releaseSchema = z.strictObject({
  leaseToken: z.uuid(),
  outcome: z.enum(['succeeded', 'failed', 'cancelled', 'requeue']),
  exitCode: int32.nullable().optional(),
  signal: reportedSignal.nullable().optional(),
  error: text().max(10_000).nullable().optional(),
  reason: z.enum(endReasons).optional(),
});
export type Release = z.input<typeof releaseSchema>;

/** A service job's process ended and its restart policy starts it again, under the same lease. */
export const restartSchema = z.strictObject({
  leaseToken: z.uuid(),
  // The run that ended (the claim's attempt, then each restart's answer): a restart sent again
  // after the server recorded it gets the same answer instead of opening another run.
  run: z.number().int().positive().optional(),
  exitCode: int32.nullable().optional(),
  signal: reportedSignal.nullable().optional(),
  // How the run ended by itself: a run stopped by anyone else is released, not restarted.
  reason: z.enum(['exited', 'timed_out']).optional(),
});
export type RestartReport = z.input<typeof restartSchema>;

const releaseItemSchema = releaseSchema.extend({ jobId: z.number().int().positive() });
export type ReleaseItem = z.input<typeof releaseItemSchema>;

/** The most jobs one request claims, and the most outcomes one request releases. */
export const MAX_BATCH = 1000;

/** Outcomes, each job once: a second would be answered as the first, and not applied. */
const releaseItems = () =>
  z
    .array(releaseItemSchema)
    .max(MAX_BATCH)
    .superRefine(eachOnce((r) => r.jobId, 'jobId', 'this job is already released by an earlier item'));

export const releaseBatchSchema = z.strictObject({
  releases: releaseItems().min(1),
});

export const claimSchema = z.strictObject({
  workerId: z.uuid(),
  max: z.number().int().min(1).max(MAX_BATCH).default(1),
  waitMs: z.number().int().min(0).max(120_000).default(0),
  /** Outcomes of finished jobs, released before the claim so their room counts: one round trip for both. */
  releases: releaseItems().optional(),
});
