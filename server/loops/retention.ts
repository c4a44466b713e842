// Retention: finished jobs past the window are deleted with their runs and output, in batches of
// their own short transactions, one after another until none is left, so that deletion keeps
// pace with any rate of finishing jobs (one batch a minute kept up with 17 jobs/s only). Then the
// rows of workers gone longer than their own window, which an autoscaled fleet leaves by the
// thousand.
import type { Logger } from 'pino';
import type { Db } from '../db.js';
import { deleteExpiredJobs, deleteGoneWorkers } from '../store/reaper.js';
import { startLeaderLoop, type Loop } from './leader-loop.js';

const RETENTION_LOCK = 0x5e1ac0e0;

/** Rows per batch: big enough to amortise a statement, small enough to keep each commit short. */
export const RETENTION_BATCH = 5000;
const WORKER_BATCH = 1000;

export interface RetentionWindows {
  /** Finished jobs older than this are deleted; 0 keeps them. */
  jobsMs: number;
  /** Workers gone or deregistered longer than this are deleted; 0 keeps them. */
  workersMs: number;
}

export function startRetention(
  db: Db,
  log: Logger,
  windows: RetentionWindows,
  timing: { intervalMs: number; firstTickMs?: number } = { intervalMs: 30_000 },
): Loop {
  const done = { jobs: 0, workers: 0 };
  return startLeaderLoop(db, log, { name: 'retention', lockKey: RETENTION_LOCK, ...timing }, async (trx) => {
    if (windows.jobsMs > 0) {
      const deleted = await deleteExpiredJobs(trx, windows.jobsMs, RETENTION_BATCH);
      done.jobs += deleted;
      if (deleted === RETENTION_BATCH) return 'more';
    }
    if (windows.workersMs > 0) {
      const workers = await deleteGoneWorkers(trx, windows.workersMs, WORKER_BATCH);
      done.workers += workers.deleted;
      if (workers.more) return 'more';
    }
    if (done.jobs > 0 || done.workers > 0) log.info({ deleted: done }, 'rows past retention deleted');
    done.jobs = done.workers = 0;
  });
}
