// Sparrow's sampling: per job, probe d workers that could run it (default 2) and queue it on the
// less loaded; each worker runs its own queue first-fit. With late binding the job leaves a
// reservation on all d, and the first worker with room to reach one takes the job (one more round
// trip); the others find it gone and move on.
import type { SimJob, SimWorker } from '../cluster.js';
import type { Engine, Model } from '../engine.js';
import { pick } from '../random.js';
import { fits } from './common.js';

/** Load as Sparrow probes it: jobs running and queued, per slot. */
const load = (w: SimWorker) => (w.allocated.slots + w.local.length) / w.capacity.slots;

export function p2cModel(engine: Engine): Model {
  const { claimSeconds } = engine.costs;
  const { p2cProbes: d, p2cLateBinding: late } = engine.modelParams;

  /** d distinct candidates, by rejection from the shape's fitting workers (d is small). */
  const sample = (job: SimJob): SimWorker[] => {
    const all = engine.cluster.refresh(job.shape).candidates;
    if (all.length <= d) return [...all];
    const chosen = new Set<SimWorker>();
    while (chosen.size < d) chosen.add(all[pick(engine.rng, all.length)]!);
    return [...chosen];
  };

  const dispatch = (w: SimWorker) => {
    if (w.state !== 'active') return;
    for (let i = 0; i < w.local.length && w.allocated.slots < w.capacity.slots;) {
      const job = w.local[i]!;
      if (job.state !== 'pending') {
        w.local.splice(i, 1); // a reservation another worker already took
        continue;
      }
      if (!fits(engine, job, w)) {
        i++;
        continue;
      }
      w.local.splice(i, 1);
      job.reservations = 0;
      engine.stmts.claim++;
      engine.assign(job, w, late ? claimSeconds : 0);
    }
  };

  const probe = (job: SimJob) => {
    const probed = sample(job);
    engine.counts.probes += probed.length;
    if (probed.length === 0) {
      job.shape.pending.push(job); // no live worker fits; waits for one to join
      return;
    }
    const targets = late ? probed : [probed.reduce((a, b) => (load(b) < load(a) ? b : a))];
    job.reservations = targets.length;
    for (const w of targets) w.local.push(job);
    for (const w of targets) dispatch(w);
  };

  return {
    // The probes' round trip comes before the job is queued anywhere.
    onPending(job) {
      engine.at(engine.now + claimSeconds, () => job.state === 'pending' && probe(job));
    },
    onFreed(w) {
      dispatch(w);
      engine.cluster.refreshAll();
      // A joining worker also takes jobs that found no worker at all.
      for (const s of w.shapes) {
        for (let j = s.pending.pop(); j; j = s.pending.pop()) if (j.state === 'pending') probe(j);
      }
    },
    // What was queued on a worker that left is probed again: at once when it drains, at the
    // reaper's pass when it fails (nobody hears of it sooner).
    onLeave(w, failed) {
      const queued = w.local.splice(0);
      for (const job of queued) {
        if (job.state !== 'pending' || --job.reservations > 0) continue;
        if (failed) {
          job.state = 'failed';
          job.shape.waiting--;
          engine.at(engine.reapTime(job), () => engine.requeue(job));
        } else probe(job);
      }
    },
  };
}
