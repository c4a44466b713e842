// One pass of the reaper, in one transaction: silent workers gone, expired leases taken back,
// stale assignments returned, missed placement deadlines failed.
import type { Logger } from 'pino';
import type { Db } from '../db.js';
import type { Metrics } from '../metrics/index.js';
import { failMissedDeadlines, returnStaleAssignments } from '../placement/scheduler.js';
import type { PlacementSettings } from '../placement/settings.js';
import { markSilentWorkersGone, reapExpiredLeases } from '../store/reaper.js';

export interface ReaperDeps {
  goneAfterMs: number;
  placement: PlacementSettings;
  log: Logger;
  metrics: Pick<Metrics, 'reaped' | 'placementRefusals'>;
}

export async function reaperTick(trx: Db, { goneAfterMs, placement, log, metrics }: ReaperDeps): Promise<void> {
  // Worker rows before job rows, the order heartbeats and deregistrations lock them in: the
  // other order deadlocked with a heartbeat naming an expired lease of a silent worker.
  const gone = await markSilentWorkersGone(trx, goneAfterMs);
  if (gone.length > 0) log.warn({ workerIds: gone }, 'workers silent too long; marked gone');
  for (const job of await reapExpiredLeases(trx)) {
    metrics.reaped.inc();
    log.warn(
      { jobId: job.id, workerId: job.worker_id, attempt: job.runs, state: job.state },
      'lease expired; run recorded as lost',
    );
  }
  for (const a of await returnStaleAssignments(trx, placement.assignTimeoutMs)) {
    log.warn({ jobId: a.id, workerId: a.worker_id }, 'assignment not started in time; job back to pending');
  }
  for (const f of await failMissedDeadlines(trx, placement, goneAfterMs)) {
    metrics.placementRefusals.inc({ reason: 'deadline' });
    log.warn({ jobId: f.id, error: f.error }, 'placement deadline missed; job failed');
  }
}
