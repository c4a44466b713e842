// A claim's long-poll: claim; when nothing fits, sleep on the hub until a job may be there (or
// an enqueue hands one over), then claim again, until the wait is over.
import type { Response } from 'express';
import type { ClaimRow, Db } from '../db.js';
import type { PlacementSettings } from '../placement/settings.js';
import { claimJobs } from '../store/claims.js';
import { leaseClock, markLeases } from '../store/lease-age.js';
import { abortOnHangUpOrStop } from './hang-up-or-stop.js';
import type { IdleClaims } from './idle-claims.js';
import type { NotifyHub } from './notify-hub.js';
import type { SleepingClaims } from './sleeping-claims.js';

/** What a long-poll uses of the server's context (AppContext has it all). */
export interface LongPollContext {
  db: Db;
  placement: PlacementSettings;
  config: { leaseTtlMs: number };
  hub: NotifyHub;
  idleClaims: IdleClaims;
  sleepingClaims: SleepingClaims;
  closing: AbortSignal;
}

/** How soon a long-poll whose claim skipped jobs other claims held looks again. */
const CONTENDED_RECHECK_MS = 100;

/** Long-poll: claim; if nothing fits, sleep until NOTIFY says a job is due (or a drain), then retry. */
export async function claimWithWait(
  ctx: LongPollContext,
  workerId: string,
  max: number,
  waitMs: number,
  res: Response,
  superseded?: AbortSignal,
): Promise<ClaimRow[]> {
  const deadline = Date.now() + waitMs;
  const { abort, dispose } = abortOnHangUpOrStop(ctx, res, superseded);
  const endForThisWorker = (p: string) => {
    if (p === workerId) abort.abort();
  };
  const stopOnDrain = ctx.hub.on('skipjack_drain', endForThisWorker);
  const stopOnEndPoll = ctx.hub.on('skipjack_end_poll', endForThisWorker);
  try {
    for (;;) {
      if (abort.signal.aborted) return [];
      const seq = ctx.hub.jobsSeq;
      let contended = false;
      if (!ctx.idleClaims.nothingNew(workerId, seq, max)) {
        const before = leaseClock();
        const claimed = await claimJobs(ctx.db, ctx.placement, workerId, { max, leaseTtlMs: ctx.config.leaseTtlMs });
        if (claimed.jobs.length > 0) {
          ctx.idleClaims.forget(workerId);
          return markLeases(claimed.jobs, before);
        }
        contended = claimed.contended;
        if (contended) ctx.idleClaims.forget(workerId);
        else ctx.idleClaims.remember(workerId, seq, max);
      }
      const left = deadline - Date.now();
      if (left <= 0 || abort.signal.aborted) return [];
      const sleeping = ctx.sleepingClaims.sleep(workerId, max);
      try {
        // Skipped jobs may be left by the claim that holds them, and no NOTIFY would say so.
        await ctx.hub.waitForJobs(seq, contended ? Math.min(left, CONTENDED_RECHECK_MS) : left, [
          abort.signal,
          sleeping.woken,
        ]);
      } finally {
        ctx.sleepingClaims.wake(sleeping);
      }
      // Taken by an enqueue: its claim for this worker committed with the insert, so the answer is ours.
      const handed = sleeping.handed ? await sleeping.handed : [];
      if (handed.length > 0) {
        ctx.idleClaims.forget(workerId);
        return handed;
      }
    }
  } finally {
    dispose();
    stopOnDrain();
    stopOnEndPoll();
  }
}
