// One workload through one placement model: the engine, the model, the run, and its summary.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { buildPlacementConfig } from '../placement/index.js';
import { arrivals } from './arrivals.js';
import { Engine, type Model, type Statements } from './engine.js';
import { cdfPoints, distribution, round, type Distribution, type SeriesPoint } from './metrics.js';
import { auctionModel } from './models/auction.js';
import { centralModel } from './models/central.js';
import { p2cModel } from './models/p2c.js';
import { pullModel } from './models/pull.js';
import { parseTrace, type TraceJob } from './trace.js';
import type { Workload } from './workload.js';

export const MODELS = ['pull', 'central', 'auction', 'p2c'] as const;
export type ModelName = (typeof MODELS)[number];
/** The old name, for callers of the two-mode simulator. */
export type Mode = ModelName;

const factories: Record<ModelName, (e: Engine) => Model> = {
  pull: pullModel,
  central: centralModel,
  auction: auctionModel,
  p2c: p2cModel,
};

export interface SimResult {
  model: ModelName;
  jobs: number;
  completed: number;
  stillWaiting: number;
  /** Runs lost with a failed worker and requeued by the reaper. */
  lost: number;
  /** Refused at enqueue: no live worker could ever run them. Reasons grouped as the server's 422. */
  unplaceable: { count: number; byClass: Record<string, { count: number; reason: string }> };
  meanWaitSeconds: number;
  wait: Distribution;
  waitByClass: Record<string, Distribution>;
  placementLatency: Distribution;
  throughputPerSecond: number;
  utilization: { cpu: number; memoryMb: number; diskMb: number; slots: number };
  strandedShare: number;
  distributionScore: number;
  violations: { constraint: number; capacity: number };
  dbStatementsPerJob: number;
  statements: Statements;
  probesPerJob: number;
  auction: { refused: number; failed: number };
  simulatedSeconds: number;
  series: SeriesPoint[];
  waitCdf: [number, number][];
}

export interface SimOptions {
  /** Where a relative `trace` path is resolved from. */
  baseDir?: string;
  /** Parsed trace rows, to skip reading the file again per model. */
  trace?: readonly TraceJob[];
  progress?: (fraction: number) => void;
}

export function loadTrace(w: Workload, baseDir = '.'): TraceJob[] {
  if (!w.trace) return [];
  const file = resolve(baseDir, w.trace);
  return parseTrace(readFileSync(file, 'utf8'), file);
}

/** When the last arrival is expected: the arrival window, cut by maxJobs at the classes' mean rate. */
function expectedArrivalEnd(w: Workload, trace: readonly TraceJob[]): number {
  const rate = w.jobs.reduce((r, c) => r + (c.ratePerSecond ?? meanRate(c.arrivals)), 0);
  const window = w.jobs.length ? w.arrivalSeconds : 0;
  const byCount = w.maxJobs && rate > 0 ? w.maxJobs / rate : Infinity;
  return Math.max(Math.min(window, byCount), trace.at(-1)?.arrival ?? 0);
}

function meanRate(a: Workload['jobs'][number]['arrivals']): number {
  if (!a) return 0;
  return a.kind === 'burst' ? a.size / a.everySeconds : a.ratePerSecond;
}

export function simulate(w: Workload, name: ModelName, options: SimOptions = {}): SimResult {
  const config = buildPlacementConfig({ rankers: w.placement.rankers });
  const engine = new Engine(config, w.costs, w.models, w.seed);
  engine.model = factories[name](engine);
  const trace = options.trace ?? loadTrace(w, options.baseDir);
  w.workers.forEach((g, i) => engine.addGroup(g, i));
  engine.feed(arrivals(w, trace).next);
  const arrivalEnd = expectedArrivalEnd(w, trace);
  const every = w.sampleSeconds ?? Math.max(arrivalEnd / 200, 1e-3);
  engine.at(0, () => engine.sample(every));
  const until = arrivalEnd * 1.5 + w.drainSeconds;
  engine.run(until, options.progress && ((now) => options.progress!(Math.min(1, now / Math.max(arrivalEnd, 1e-9)))));
  return summarize(engine, name);
}

function summarize(e: Engine, model: ModelName): SimResult {
  const wait = distribution(e.waits);
  const c = e.counts;
  const placed = Math.max(1, c.jobs - sumCounts(e.unplaceable));
  const statements = Object.values(e.stmts).reduce((a, b) => a + b, 0);
  const avg = (f: (p: SeriesPoint) => number) =>
    e.series.length ? round(e.series.reduce((a, p) => a + f(p), 0) / e.series.length) : 0;
  let stillWaiting = 0;
  for (const s of e.cluster.shapes.values()) stillWaiting += s.waiting;
  return {
    model,
    jobs: c.jobs,
    completed: c.completed,
    stillWaiting,
    lost: c.lost,
    unplaceable: { count: sumCounts(e.unplaceable), byClass: Object.fromEntries(e.unplaceable) },
    meanWaitSeconds: wait.mean,
    wait,
    waitByClass: Object.fromEntries(
      [...e.waitsByClass].map(([k, s]): [string, Distribution] => [k, distribution(s)]).sort(byKey),
    ),
    placementLatency: distribution(e.placementLatency),
    throughputPerSecond: round(c.completed / (e.lastFinish || 1)),
    utilization: e.usage.averages(),
    strandedShare: avg((p) => p.stranded),
    distributionScore: avg((p) => p.distribution),
    violations: { ...e.cluster.violations },
    dbStatementsPerJob: round(statements / placed, 3),
    statements: { ...e.stmts },
    probesPerJob: round(c.probes / placed, 3),
    auction: { refused: c.refused, failed: c.failed },
    simulatedSeconds: round(e.now, 3),
    series: e.series.map((p) => ({
      t: round(p.t, 3),
      cpu: round(p.cpu),
      memoryMb: round(p.memoryMb),
      slots: round(p.slots),
      distribution: round(p.distribution),
      stranded: round(p.stranded),
    })),
    waitCdf: cdfPoints(e.waits),
  };
}

const sumCounts = (m: Map<string, { count: number }>) => [...m.values()].reduce((a, b) => a + b.count, 0);
const byKey = (a: [string, unknown], b: [string, unknown]) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
