// Helpers the models share: the head of a shape's queue, and a fit check through the configured filters.
import { firstFailure, queueFilter } from '../../placement/index.js';
import { claimOrder, type Shape, type SimJob, type SimWorker } from '../cluster.js';
import type { Engine } from '../engine.js';

/** The first job still pending in claim order; stale entries (placed elsewhere, lost) drop out lazily. */
export function head(shape: Shape): SimJob | undefined {
  let j = shape.pending.peek();
  while (j && j.state !== 'pending') {
    shape.pending.pop();
    j = shape.pending.peek();
  }
  return j;
}

/** The server's filters, queue first, on the worker as it is now (free capacity included). */
export function fits(engine: Engine, job: SimJob, w: SimWorker): boolean {
  const ctx = { now: engine.now * 1000 };
  return queueFilter.check(job, w, ctx) === null && firstFailure(job, w, engine.config.filters, ctx) === null;
}

/** Shapes with a pending job, each refreshed: their candidate and free-worker sets are current. */
export function pendingShapes(engine: Engine): Shape[] {
  const out: Shape[] = [];
  for (const s of engine.cluster.shapes.values()) if (head(s)) out.push(engine.cluster.refresh(s));
  return out;
}

/** The shape whose head comes first in claim order, among those not ruled out this pass. */
export function firstInOrder(shapes: readonly Shape[], skip: Set<Shape>): Shape | undefined {
  let best: Shape | undefined;
  let bestJob: SimJob | undefined;
  for (const s of shapes) {
    if (skip.has(s)) continue;
    const j = head(s);
    if (!j) continue;
    if (!bestJob || claimOrder(j, bestJob)) {
      best = s;
      bestJob = j;
    }
  }
  return best;
}

/** A timer that fires on the next multiple of `period`, armed at most once at a time. */
export function ticker(engine: Engine, period: number, tick: () => void): () => void {
  let armed = false;
  return () => {
    if (armed) return;
    armed = true;
    const at = (Math.floor(engine.now / period + 1e-9) + 1) * period;
    engine.at(at, () => {
      armed = false;
      tick();
    });
  };
}
