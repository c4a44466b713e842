// Retention: finished jobs past the window are deleted with their runs and output, in batches of
// their own short transactions, one after another until none is left, so that deletion keeps
// pace with any rate of finishing jobs (one batch a minute kept up with 17 jobs/s only).
import type { Logger } from 'pino';
import type { Db } from '../db.js';
import { deleteExpiredJobs } from '../store/reaper.js';
import { startLeaderLoop, type Loop } from './leader-loop.js';

const RETENTION_LOCK = 0x5e1ac0e0;

/** Rows per batch: big enough to amortise a statement, small enough to keep each commit short. */
export const RETENTION_BATCH = 5000;

export function startRetention(
  db: Db,
  log: Logger,
  retentionMs: number,
  timing: { intervalMs: number; firstTickMs?: number } = { intervalMs: 30_000 },
): Loop {
  let deletedInRun = 0;
  return startLeaderLoop(db, log, { name: 'retention', lockKey: RETENTION_LOCK, ...timing }, async (trx) => {
    const deleted = await deleteExpiredJobs(trx, retentionMs, RETENTION_BATCH);
    deletedInRun += deleted;
    if (deleted === RETENTION_BATCH) return 'more';
    if (deletedInRun > 0)
      log.info(
        { deleted: deletedInRun, retentionHours: retentionMs / 3_600_000 },
        'finished jobs past retention deleted',
      );
    deletedInRun = 0;
  });
}
