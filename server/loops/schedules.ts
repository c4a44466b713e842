// The schedule loop: every server runs one. It sleeps until the earliest schedule is due (but
// looks again at least every `pollMs`, for schedules another server added), then enqueues what
// is due. Servers need no leader for this: a due schedule's row is locked while its tick is
// enqueued, and the tick's job has a key of its own.
import type { Logger } from 'pino';
import type { Db } from '../db.js';
import { fireDueSchedules, nextDueAt } from '../store/schedules.js';
import type { Loop } from './leader-loop.js';

export interface ScheduleLoop extends Loop {
  /** A schedule changed here: look again now rather than at the next poll. */
  poke(): void;
}

export function startScheduleLoop(db: Db, log: Logger, pollMs = 10_000): ScheduleLoop {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  const pass = async () => {
    try {
      for (const f of await fireDueSchedules(db)) {
        if (!f.created) continue; // another server enqueued this tick
        log.info(
          { schedule: f.schedule, tick: f.tick.toISOString(), jobId: f.jobId, missedTicks: f.missed - 1 },
          f.missed > 1 ? 'schedule ticks missed while no server ran; one job for them' : 'scheduled job enqueued',
        );
      }
      const due = await nextDueAt(db);
      return due ? Math.max(0, Math.min(pollMs, due.getTime() - Date.now())) : pollMs;
    } catch (err) {
      if (!stopped) log.warn({ err: (err as Error).message }, 'schedule pass failed; trying again');
      return pollMs;
    }
  };
  const schedule = (delayMs: number) => {
    if (stopped) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      running = pass().then(schedule);
    }, delayMs);
  };
  schedule(0);
  return {
    poke: () => running.then(() => schedule(0)),
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
