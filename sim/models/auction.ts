// Diego's auctioneer, as its design describes it: work is batched; each round takes the pending
// batch, biggest first, and every cell that fits scores itself; the lowest score wins. Cells may
// refuse at commit (their state moved on); refused work goes back for the next round, up to a limit.
import { jobRequest, type Capacity } from '../../placement/index.js';
import type { Shape, SimJob, SimWorker } from '../cluster.js';
import type { Engine, Model } from '../engine.js';
import { firstInOrder, fits, head, pendingShapes, ticker } from './common.js';

const SCORED = ['cpu', 'memoryMb', 'diskMb', 'slots'] as const;

/**
 * A cell's bid: the mean share of its resources in use after taking the job (over the resources
 * it has), plus `classPenalty` per instance of the job's class it already runs. Lower wins: it
 * spreads a class across cells first, then balances load.
 */
export function auctionScore(
  need: Capacity,
  capacity: Capacity,
  allocated: Capacity,
  sameClass: number,
  classPenalty: number,
): number {
  let sum = 0;
  let n = 0;
  for (const k of SCORED) {
    if (capacity[k] <= 0) continue;
    sum += (allocated[k] + need[k]) / capacity[k];
    n++;
  }
  return (n ? sum / n : 0) + classPenalty * sameClass;
}

/** Bigger first: memory, then cpu, then disk; claim order among equals. */
function bigger(a: SimJob, b: SimJob): number {
  const x = jobRequest(a);
  const y = jobRequest(b);
  return y.memoryMb - x.memoryMb || y.cpu - x.cpu || y.diskMb - x.diskMb || b.priority - a.priority || a.id - b.id;
}

export function auctionModel(engine: Engine): Model {
  const { tickSeconds, batchSize, wakeSeconds, claimSeconds } = engine.costs;
  const {
    auctionRefuseProbability: refuseP,
    auctionMaxResubmits: maxResubmits,
    auctionClassPenalty,
  } = engine.modelParams;

  /** The batch: pending jobs in claim order, from shapes that some free cell could take now. */
  const gather = (): SimJob[] => {
    const shapes = pendingShapes(engine).filter((s) => s.free.size > 0);
    const batch: SimJob[] = [];
    const skip = new Set<Shape>();
    while (batch.length < batchSize) {
      const s = firstInOrder(shapes, skip);
      if (!s) break;
      const j = s.pending.pop()!;
      j.state = 'placed'; // out of the queue while it is auctioned
      batch.push(j);
      if (!head(s)) skip.add(s);
    }
    for (const j of batch) j.state = 'pending';
    return batch.sort(bigger);
  };

  const bid = (job: SimJob): SimWorker | null => {
    const need = jobRequest(job);
    let best: SimWorker | null = null;
    let bestScore = Infinity;
    for (const w of job.shape.free.values()) {
      if (!fits(engine, job, w)) continue;
      const score = auctionScore(
        need,
        w.capacity,
        w.allocated,
        w.classCounts.get(job.classIndex) ?? 0,
        auctionClassPenalty,
      );
      if (score < bestScore || (score === bestScore && best && w.seq < best.seq)) {
        best = w;
        bestScore = score;
      }
    }
    return best;
  };

  const round = () => {
    engine.stmts.schedulerPass++;
    const refused: SimJob[] = [];
    let placed = 0;
    for (const job of gather()) {
      const w = bid(job);
      if (!w) {
        job.shape.pending.push(job); // fits no cell this round; waits, holding no one back
        continue;
      }
      engine.stmts.assign++;
      engine.assign(job, w, wakeSeconds + claimSeconds);
      if (refuseP > 0 && engine.rng() < refuseP) refused.push(job);
      else placed++;
    }
    // Commit: a refusing cell gives the work back; it goes to the next round or, past the limit, fails.
    for (const job of refused) {
      engine.unassign(job);
      engine.counts.refused++;
      if (++job.resubmits > maxResubmits) {
        job.state = 'failed';
        job.shape.waiting--;
        engine.counts.failed++;
      } else job.shape.pending.push(job);
    }
    if (placed > 0 || refused.length > 0) arm();
  };
  const arm = ticker(engine, tickSeconds, round);

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
