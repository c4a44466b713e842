// Wakes claimers when a job that was enqueued for later becomes due. NOTIFY arms a timer for
// jobs that arrive while this server listens; this covers those that were already waiting when
// it started, one due time at a time.
import { sql } from 'kysely';
import type { Db } from '../db.js';
import type { NotifyHub } from '../notify.js';

export function startDueWakeups(db: Db, hub: NotifyHub): { stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const armNext = async () => {
    const { rows } = await sql<{ due: number | null }>`
      SELECT extract(epoch FROM min(run_at)) * 1000 AS due FROM jobs WHERE state = 'pending' AND run_at > now()`.execute(db);
    const due = rows[0]?.due;
    if (stopped || due === null || due === undefined) return;
    timer = setTimeout(() => {
      hub.wakeJobs();
      armNext().catch(() => {});
    }, Math.min(Math.max(0, Number(due) - Date.now() + 5), 2 ** 31 - 1));
  };
  armNext().catch(() => {});
  return { stop() { stopped = true; clearTimeout(timer); } };
}
