// A workload to simulate: worker groups (with the times they join, fail or drain), job classes
// (arrivals and run times) or a trace, and the costs the real system pays. Job constraints and
// preferences have the wire API's shapes, so a class can be copied from real jobs.
import { z } from 'zod';
import { constraintsSchema, preferenceSchema } from '../protocol/schemas.js';

const capacity = z
  .strictObject({
    cpu: z.number().int().min(0).default(4000),
    memoryMb: z.number().int().min(0).default(8192),
    diskMb: z.number().int().min(0).default(100_000),
    slots: z.number().int().min(1).default(8),
  })
  .default({ cpu: 4000, memoryMb: 8192, diskMb: 100_000, slots: 8 });

const workerGroup = z.strictObject({
  name: z.string().min(1).optional(),
  count: z.number().int().min(1).max(100_000),
  region: z.string().min(1).optional(),
  labels: z.record(z.string(), z.string()).default({}),
  queues: z.array(z.string().min(1)).min(1).optional(),
  capacity,
  /** Seconds into the run: when the group registers, loses its machines, or starts draining. */
  joinAt: z.number().min(0).default(0),
  failAt: z.number().min(0).optional(),
  drainAt: z.number().min(0).optional(),
});

const arrivals = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('poisson'), ratePerSecond: z.number().positive() }),
  /** `size` jobs at once every `everySeconds`, from `firstAt`. */
  z.strictObject({
    kind: z.literal('burst'),
    everySeconds: z.number().positive(),
    size: z.number().int().min(1),
    firstAt: z.number().min(0).default(0),
  }),
  /** Poisson with rate × (1 + amplitude × sin(2πt / period)): a day's swell compressed or not. */
  z.strictObject({
    kind: z.literal('diurnal'),
    ratePerSecond: z.number().positive(),
    amplitude: z.number().min(0).max(1).default(0.8),
    periodSeconds: z.number().positive().default(86_400),
  }),
]);

export const runTimeSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('fixed'), seconds: z.number().positive() }),
  z.strictObject({ kind: z.literal('exponential'), mean: z.number().positive() }),
  z.strictObject({ kind: z.literal('lognormal'), mean: z.number().positive(), sigma: z.number().min(0).default(1) }),
]);

const jobClass = z
  .strictObject({
    name: z.string().min(1),
    queue: z.string().min(1).default('default'),
    /** Shorthand for Poisson arrivals at this rate. */
    ratePerSecond: z.number().positive().optional(),
    arrivals: arrivals.optional(),
    /** Shorthand for exponential run times with this mean. */
    meanRunSeconds: z.number().positive().optional(),
    runTime: runTimeSchema.optional(),
    priority: z.number().int().default(0),
    constraints: constraintsSchema.default({}),
    preferences: z.array(preferenceSchema).default([]),
  })
  .refine((c) => c.arrivals || c.ratePerSecond, { message: 'give arrivals or ratePerSecond' })
  .refine((c) => c.runTime || c.meanRunSeconds, { message: 'give runTime or meanRunSeconds' });

/**
 * What the real system pays, in seconds. Defaults are measured: a claim statement's round trip
 * 1.84-2.9 ms (README, Performance), the long-poll wake-up ~5 ms, the central scheduler's 250 ms
 * tick and 500-job pass, and a heartbeat every third of the 30 s lease TTL.
 */
const costs = z
  .strictObject({
    claimSeconds: z.number().min(0).default(0.002),
    wakeSeconds: z.number().min(0).default(0.005),
    tickSeconds: z.number().positive().default(0.25),
    batchSize: z.number().int().min(1).default(500),
    heartbeatSeconds: z.number().positive().default(10),
    leaseTtlSeconds: z.number().positive().default(30),
    reaperIntervalSeconds: z.number().positive().default(5),
  })
  .default({
    claimSeconds: 0.002,
    wakeSeconds: 0.005,
    tickSeconds: 0.25,
    batchSize: 500,
    heartbeatSeconds: 10,
    leaseTtlSeconds: 30,
    reaperIntervalSeconds: 5,
  });

/** The models' own knobs. */
const models = z
  .strictObject({
    /** Diego: a cell refuses a won bid at commit with this probability; refused work is resubmitted. */
    auctionRefuseProbability: z.number().min(0).max(1).default(0),
    auctionMaxResubmits: z.number().int().min(0).default(5),
    /** Diego's penalty per instance of the same job class a cell already runs. */
    auctionClassPenalty: z.number().min(0).default(1000),
    /** Sparrow: workers probed per job, and whether jobs bind late (reservations). */
    p2cProbes: z.number().int().min(1).default(2),
    p2cLateBinding: z.boolean().default(false),
  })
  .default({
    auctionRefuseProbability: 0,
    auctionMaxResubmits: 5,
    auctionClassPenalty: 1000,
    p2cProbes: 2,
    p2cLateBinding: false,
  });

const rankerSpec = z.strictObject({
  name: z.string(),
  weight: z.number().optional(),
  params: z.record(z.string(), z.unknown()).optional(),
});

export const workloadSchema = z
  .strictObject({
    seed: z.number().int().default(1),
    /** Jobs arrive during this long (classes), or up to `maxJobs` of them, whichever ends first. */
    arrivalSeconds: z.number().positive().default(3600),
    maxJobs: z.number().int().min(1).optional(),
    /** After the last arrival, the run goes on until every job ends or this long passes. */
    drainSeconds: z.number().min(0).default(3600),
    workers: z.array(workerGroup).min(1),
    jobs: z.array(jobClass).default([]),
    /** A CSV or JSONL trace (see sim/trace.ts), instead of or beside the classes; relative to the workload. */
    trace: z.string().min(1).optional(),
    costs,
    models,
    placement: z.strictObject({ rankers: z.array(rankerSpec).optional() }).default({}),
    /** Utilization, spread and stranded capacity are sampled this often (default: the run in 200 steps). */
    sampleSeconds: z.number().positive().optional(),
  })
  .refine((w) => w.jobs.length > 0 || w.trace, { message: 'give job classes or a trace' });

export type Workload = z.output<typeof workloadSchema>;
export type WorkloadInput = z.input<typeof workloadSchema>;
export type JobClass = Workload['jobs'][number];
export type WorkerGroup = Workload['workers'][number];
export type RunTime = z.output<typeof runTimeSchema>;
export type Costs = Workload['costs'];
export type ModelParams = Workload['models'];
