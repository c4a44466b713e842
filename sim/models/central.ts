// Central: a scheduler with the global view runs every tick, takes pending jobs in claim order up
// to its batch, ranks every free worker that could take each one, and assigns the best; the
// worker's long-poll then wakes and its claim starts the job. A shape with no fitting worker now
// is set aside for the pass, so jobs that fit nowhere never hold back the jobs behind them.
import { place } from '../../placement/index.js';
import type { Shape, SimWorker } from '../cluster.js';
import type { Engine, Model } from '../engine.js';
import { firstInOrder, head, pendingShapes, ticker } from './common.js';

export function centralModel(engine: Engine): Model {
  const { tickSeconds, batchSize, wakeSeconds, claimSeconds } = engine.costs;

  const pass = () => {
    engine.stmts.schedulerPass++;
    const shapes = pendingShapes(engine);
    const skip = new Set<Shape>();
    let placed = 0;
    while (placed < batchSize) {
      const shape = firstInOrder(shapes, skip);
      if (!shape) break;
      const job = head(shape)!;
      const { chosen } = place(job, shape.free.values(), {
        ...engine.config,
        ctx: { now: engine.now * 1000 },
      });
      if (!chosen) {
        skip.add(shape);
        continue;
      }
      engine.stmts.assign++;
      engine.assign(job, chosen as SimWorker, wakeSeconds + claimSeconds);
      placed++;
    }
    // A full batch means more may fit now; otherwise wait for room or work to change.
    if (placed === batchSize) arm();
  };
  const arm = ticker(engine, tickSeconds, pass);

  return {
    onPending(job) {
      job.shape.pending.push(job);
      arm();
    },
    onFreed() {
      for (const s of engine.cluster.shapes.values()) if (s.waiting > 0) return arm();
    },
  };
}
