// A workload to simulate: workers by group, and job classes arriving at a rate. The same shapes
// the wire API uses for constraints and preferences, so a class can be copied from real jobs.
import { z } from 'zod';
import { constraintsSchema, preferenceSchema } from '../protocol/schemas.js';

const workerGroup = z.strictObject({
  count: z.number().int().min(1).max(10_000),
  region: z.string().min(1).optional(),
  labels: z.record(z.string(), z.string()).default({}),
  capacity: z
    .strictObject({
      cpu: z.number().int().min(0).default(4000),
      memoryMb: z.number().int().min(0).default(8192),
      diskMb: z.number().int().min(0).default(100_000),
      slots: z.number().int().min(1).default(8),
    })
    .default({ cpu: 4000, memoryMb: 8192, diskMb: 100_000, slots: 8 }),
});

const jobClass = z.strictObject({
  name: z.string().min(1),
  /** Poisson arrivals. */
  ratePerSecond: z.number().positive(),
  /** Exponentially distributed run time with this mean. */
  meanRunSeconds: z.number().positive(),
  priority: z.number().int().default(0),
  constraints: constraintsSchema.default({}),
  preferences: z.array(preferenceSchema).default([]),
});

export const workloadSchema = z.strictObject({
  seed: z.number().int().default(1),
  /** Jobs arrive during this long; the run continues until they finish or `drainSeconds` pass. */
  arrivalSeconds: z.number().positive().max(86_400),
  drainSeconds: z.number().min(0).default(3600),
  workers: z.array(workerGroup).min(1),
  jobs: z.array(jobClass).min(1),
  /** Pull: how long an idle worker's long-poll takes to answer a new job, and its claim batch. */
  pull: z.strictObject({ wakeDelaySeconds: z.number().min(0).default(0.005) }).default({ wakeDelaySeconds: 0.005 }),
  /** Central: how often the scheduler runs, and the delay from assignment to start. */
  central: z
    .strictObject({
      intervalSeconds: z.number().positive().default(0.25),
      startDelaySeconds: z.number().min(0).default(0.005),
    })
    .default({ intervalSeconds: 0.25, startDelaySeconds: 0.005 }),
  placement: z
    .strictObject({
      rankers: z
        .array(
          z.strictObject({
            name: z.string(),
            weight: z.number().optional(),
            params: z.record(z.string(), z.unknown()).optional(),
          }),
        )
        .optional(),
    })
    .default({}),
});
export type Workload = z.output<typeof workloadSchema>;
