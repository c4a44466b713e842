// Schedules: rows of the schedules table, and a due schedule's tick turned into its job. A tick's
// job carries the idempotency key schedule:NAME:TICK, and the schedule row is locked (SKIP LOCKED)
// while its tick is enqueued and its next tick set: one job per tick, however many servers run.
import { Cron } from 'croner';
import { sql } from 'kysely';
import type { EnqueueJobParsed } from '../../protocol/schemas.js';
import type { ScheduleView } from '../../protocol/schedules.js';
import type { Db } from '../db.js';
import { notFound } from '../errors.js';
import { invalidRequest } from '../validate.js';
import { enqueueJobs } from './jobs.js';

interface ScheduleRow {
  name: string;
  cron: string;
  time_zone: string;
  job: EnqueueJobParsed;
  paused: boolean;
  next_run_at: Date | null;
  last_run_at: Date | null;
  last_job_id: number | null;
  created_at: Date;
}

/** The parsed expression, or a 400 naming the field that is wrong. */
export function cronOf(cron: string, timeZone: string): Cron {
  try {
    Intl.DateTimeFormat('en', { timeZone });
  } catch {
    throw invalidRequest([{ path: 'body.timeZone', message: `${timeZone} is not an IANA time zone` }]);
  }
  try {
    return new Cron(cron, { timezone: timeZone, paused: true });
  } catch (err) {
    throw invalidRequest([{ path: 'body.cron', message: (err as Error).message }]);
  }
}

/** The first tick strictly after `after`, or null for an expression with none left. */
export function nextTick(cron: string, timeZone: string, after: Date): Date | null {
  return cronOf(cron, timeZone).nextRun(after);
}

export async function upsertSchedule(
  db: Db,
  s: { name: string; cron: string; timeZone: string; job: EnqueueJobParsed; paused: boolean },
): Promise<{ view: ScheduleView; created: boolean }> {
  const next = s.paused ? null : nextTick(s.cron, s.timeZone, new Date());
  if (!s.paused && next === null) throw invalidRequest([{ path: 'body.cron', message: 'has no tick left to come' }]);
  const { rows } = await sql<ScheduleRow & { created: boolean }>`
    INSERT INTO schedules (name, cron, time_zone, job, paused, next_run_at)
    VALUES (${s.name}, ${s.cron}, ${s.timeZone}, ${JSON.stringify(s.job)}::jsonb, ${s.paused}, ${next})
    ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, time_zone = excluded.time_zone, job = excluded.job,
      paused = excluded.paused, next_run_at = excluded.next_run_at, updated_at = now()
    RETURNING *, (xmax = 0) AS created`.execute(db);
  return { view: toView(rows[0]), created: rows[0].created };
}

export async function listSchedules(db: Db): Promise<ScheduleView[]> {
  const { rows } = await sql<ScheduleRow>`SELECT * FROM schedules ORDER BY name`.execute(db);
  return rows.map(toView);
}

export async function deleteSchedule(db: Db, name: string): Promise<void> {
  const { rows } = await sql`DELETE FROM schedules WHERE name = ${name} RETURNING name`.execute(db);
  if (rows.length === 0) throw notFound(`schedule ${name}`);
}

/** When the earliest schedule is due, if any: the loop sleeps until then. */
export async function nextDueAt(db: Db): Promise<Date | null> {
  const { rows } = await sql<{ at: Date | null }>`
    SELECT min(next_run_at) AS at FROM schedules WHERE NOT paused`.execute(db);
  return rows[0].at;
}

export interface Fired {
  schedule: string;
  tick: Date;
  jobId: number;
  created: boolean;
  /** Ticks folded into this job: they fell while no server ran. */
  missed: number;
}

/**
 * Enqueues the due tick of every due schedule, each in its own transaction. Ticks missed while no
 * server ran are folded into one job, keyed by the first of them, as systemd's Persistent= timers
 * run once for all they missed; the schedule then goes on from the first tick after now.
 */
export async function fireDueSchedules(db: Db, batch = 100): Promise<Fired[]> {
  const fired: Fired[] = [];
  for (;;) {
    const one = await db.transaction().execute(async (trx) => {
      const { rows } = await sql<ScheduleRow>`
        SELECT * FROM schedules WHERE NOT paused AND next_run_at <= now()
        ORDER BY next_run_at LIMIT 1 FOR UPDATE SKIP LOCKED`.execute(trx);
      if (rows.length === 0) return null;
      return fireOne(trx, rows[0]);
    });
    if (!one) return fired;
    fired.push(one);
    if (fired.length >= batch) return fired;
  }
}

async function fireOne(trx: Db, row: ScheduleRow): Promise<Fired> {
  const tick = row.next_run_at!;
  const now = new Date();
  const next = nextTick(row.cron, row.time_zone, now);
  const missed = countTicks(row, tick, now);
  const key = `schedule:${row.name}:${tick.toISOString()}`;
  const [{ job, created }] = await enqueueJobs(trx, [{ ...row.job, idempotencyKey: key }]);
  await sql`
    UPDATE schedules SET next_run_at = ${next}, last_run_at = ${tick}, last_job_id = ${job.id}, updated_at = now()
    WHERE name = ${row.name}`.execute(trx);
  return { schedule: row.name, tick, jobId: job.id, created, missed };
}

/** Ticks from `first` up to `now` (at most 1,000 counted): 1 when the server kept up. */
function countTicks(row: ScheduleRow, first: Date, now: Date): number {
  const cron = cronOf(row.cron, row.time_zone);
  let n = 1;
  for (let t = cron.nextRun(first); t && t <= now && n < 1000; t = cron.nextRun(t)) n++;
  return n;
}

function toView(row: ScheduleRow): ScheduleView {
  return {
    name: row.name,
    cron: row.cron,
    timeZone: row.time_zone,
    job: masked(row.job),
    paused: row.paused,
    nextRunAt: row.next_run_at?.toISOString() ?? null,
    lastRunAt: row.last_run_at?.toISOString() ?? null,
    lastJobId: row.last_job_id === null ? null : Number(row.last_job_id),
    createdAt: row.created_at.toISOString(),
  };
}

/** A template's secret env values are shown as *** here, as in every job answer but a claim. */
function masked(job: EnqueueJobParsed): EnqueueJobParsed {
  if (!job.secretEnv?.length || !job.env) return job;
  const secret = new Set(job.secretEnv);
  return { ...job, env: Object.fromEntries(Object.entries(job.env).map(([k, v]) => [k, secret.has(k) ? '***' : v])) };
}
