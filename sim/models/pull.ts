// Pull, as the server runs it: idle workers long-poll; a new job wakes one that fits, which claims
// it; a worker with room claims first-fit in claim order (priority desc, run_at, id) up to its free
// slots. Rankers play no part, as in the server's claim.
import { pick } from '../random.js';
import { claimOrder as before, type SimJob, type SimWorker } from '../cluster.js';
import type { Engine, Model } from '../engine.js';
import { fits, head } from './common.js';

export function pullModel(engine: Engine): Model {
  const { wakeSeconds, claimSeconds } = engine.costs;

  /** The long-poll hands a new job to one sleeping worker that fits it (whoever answers first). */
  const wake = (job: SimJob) => {
    const free = engine.cluster.refresh(job.shape).free;
    const n = free.size;
    if (n === 0) return;
    const from = pick(engine.rng, n);
    for (let i = 0; i < n; i++) {
      const w = free.at((from + i) % n);
      if (!fits(engine, job, w)) continue;
      engine.stmts.claim++;
      engine.assign(job, w, wakeSeconds + claimSeconds);
      return;
    }
  };

  /** One claim statement: the best pending heads across the worker's shapes, while they fit. */
  const claim = (w: SimWorker) => {
    engine.cluster.refreshAll();
    let took = 0;
    while (w.allocated.slots < w.capacity.slots) {
      let best: SimJob | undefined;
      for (const s of w.shapes) {
        const j = head(s);
        if (j && (!best || before(j, best)) && fits(engine, j, w)) best = j;
      }
      if (!best) break;
      engine.assign(best, w, claimSeconds);
      took++;
    }
    if (took > 0) engine.stmts.claim++;
    else engine.stmts.emptyClaim++;
  };

  return {
    onPending(job) {
      job.shape.pending.push(job);
      wake(job);
    },
    onFreed: claim,
  };
}
