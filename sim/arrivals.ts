// Arrivals, made lazily and merged in time order: a million jobs never sit in memory at once.
// Each class draws from its own seeded streams, so every model sees exactly the same jobs.
import type { JobConstraints, LabelPreference } from '../placement/index.js';
import { Heap } from './heap.js';
import { exponential, lognormal, stream, type Rng } from './random.js';
import type { TraceJob } from './trace.js';
import type { JobClass, RunTime, Workload } from './workload.js';

export interface Arrival {
  arrival: number;
  runSeconds: number;
  className: string;
  queue: string;
  priority: number;
  constraints: JobConstraints;
  preferences: LabelPreference[];
}

interface Stream {
  next(): Arrival | null;
}

export function drawRunTime(rt: RunTime, rng: Rng): number {
  if (rt.kind === 'fixed') return rt.seconds;
  if (rt.kind === 'exponential') return exponential(rng, rt.mean);
  return lognormal(rng, rt.mean, rt.sigma);
}

/** The next arrival time after t, for each arrival process. */
function arrivalClock(c: JobClass, rng: Rng): () => number {
  const a = c.arrivals ?? { kind: 'poisson' as const, ratePerSecond: c.ratePerSecond! };
  let t = 0;
  if (a.kind === 'poisson') return () => (t += exponential(rng, 1 / a.ratePerSecond));
  if (a.kind === 'burst') {
    let k = 0;
    return () => a.firstAt + Math.floor(k++ / a.size) * a.everySeconds;
  }
  // Thinning (Lewis-Shedler): candidates at the peak rate, each kept with rate(t)/peak.
  const peak = a.ratePerSecond * (1 + a.amplitude);
  return () => {
    for (;;) {
      t += exponential(rng, 1 / peak);
      const rate = a.ratePerSecond * (1 + a.amplitude * Math.sin((2 * Math.PI * t) / a.periodSeconds));
      if (rng() * peak <= rate) return t;
    }
  };
}

function classStream(c: JobClass, index: number, seed: number, until: number): Stream {
  const clock = arrivalClock(c, stream(seed, 2 * index));
  const runRng = stream(seed, 2 * index + 1);
  const runTime: RunTime = c.runTime ?? { kind: 'exponential', mean: c.meanRunSeconds! };
  return {
    next() {
      const arrival = clock();
      if (arrival >= until) return null;
      return {
        arrival,
        runSeconds: drawRunTime(runTime, runRng),
        className: c.name,
        queue: c.queue,
        priority: c.priority,
        constraints: c.constraints,
        preferences: c.preferences,
      };
    },
  };
}

function traceStream(rows: readonly TraceJob[]): Stream {
  let i = 0;
  return { next: () => (i < rows.length ? { ...rows[i++]!, preferences: [] } : null) };
}

/** Every class and the trace merged by arrival time (ties: the earlier stream), cut at maxJobs. */
export function arrivals(w: Workload, trace: readonly TraceJob[] = []): Stream {
  const streams = w.jobs.map((c, i) => classStream(c, i, w.seed, w.arrivalSeconds));
  if (trace.length) streams.push(traceStream(trace));
  type Head = { a: Arrival; s: number };
  const heads = new Heap<Head>((x, y) => x.a.arrival < y.a.arrival || (x.a.arrival === y.a.arrival && x.s < y.s));
  streams.forEach((s, i) => {
    const a = s.next();
    if (a) heads.push({ a, s: i });
  });
  let left = w.maxJobs ?? Infinity;
  return {
    next() {
      const head = heads.pop();
      if (!head || left-- <= 0) return null;
      const following = streams[head.s]!.next();
      if (following) heads.push({ a: following, s: head.s });
      return head.a;
    },
  };
}
