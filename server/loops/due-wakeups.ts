// Finds the next time a delayed job becomes due, for the hub's single due timer. NOTIFY
// announces delayed jobs that arrive while this server listens; this covers the ones already
// waiting when it started or reconnected, one due time at a time.
import { sql } from 'kysely';
import type { Db } from '../db.js';
import type { NotifyHub } from '../long-poll/notify-hub.js';

export function startDueWakeups(db: Db, hub: NotifyHub): { stop(): void } {
  let stopped = false;
  const armNext = async () => {
    const { rows } = await sql<{ due: number | null }>`
      SELECT extract(epoch FROM min(run_at)) * 1000 AS due FROM jobs WHERE state = 'pending' AND run_at > now()`.execute(
      db,
    );
    const due = rows[0]?.due;
    if (!stopped && due !== null && due !== undefined) hub.armDue(Number(due));
  };
  hub.onDue = () => void armNext().catch(() => {});
  hub.onDue();
  return {
    stop() {
      stopped = true;
      hub.onDue = null;
    },
  };
}
