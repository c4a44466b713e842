// Schedules on the wire: a cron expression in a time zone and the job each tick enqueues.
import { z } from 'zod';
import { enqueueJobSchema, type EnqueueJob } from './schemas.js';

export const scheduleNameSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/, 'a schedule name is 1-64 of a-z 0-9 _ . -');

export const scheduleParamSchema = z.strictObject({ name: scheduleNameSchema });

export const createScheduleSchema = z.strictObject({
  name: scheduleNameSchema,
  /** Five fields (minute first), or six with seconds first; checked by the server's cron parser. */
  cron: z.string().min(1).max(200),
  /** An IANA time zone, e.g. Europe/Madrid; ticks follow its clock changes. */
  timeZone: z.string().min(1).max(64).default('UTC'),
  /** The job each tick enqueues; its idempotencyKey is the schedule's and the tick's. */
  job: enqueueJobSchema.refine((j) => j.idempotencyKey === undefined, {
    message: "must not carry an idempotencyKey: each tick's job gets schedule:NAME:TICK",
    path: ['idempotencyKey'],
  }),
  paused: z.boolean().default(false),
});

export type CreateSchedule = Omit<z.input<typeof createScheduleSchema>, 'job'> & { job: EnqueueJob };

export interface ScheduleView {
  name: string;
  cron: string;
  timeZone: string;
  job: EnqueueJob;
  paused: boolean;
  /** The next tick still to enqueue; null while paused. */
  nextRunAt: string | null;
  lastRunAt: string | null;
  lastJobId: number | null;
  createdAt: string;
}

/** A schedule as answers carry it, for the API document. */
export const scheduleViewSchema = z.looseObject({
  name: z.string(),
  cron: z.string(),
  timeZone: z.string(),
  job: z.record(z.string(), z.unknown()),
  paused: z.boolean(),
  nextRunAt: z.string().nullable(),
  lastRunAt: z.string().nullable(),
  lastJobId: z.number().nullable(),
  createdAt: z.string(),
});
