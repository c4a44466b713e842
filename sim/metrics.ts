// What a run measured, and its summary. Samples go into growable typed arrays: a million waits
// cost 8 MB, not a million objects.
import type { Cluster } from './cluster.js';

export class Samples {
  private data = new Float64Array(1024);
  length = 0;
  push(x: number): void {
    if (this.length === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.length++] = x;
  }
  sorted(): Float64Array {
    return this.data.slice(0, this.length).sort();
  }
}

export interface Distribution {
  count: number;
  mean: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

const round = (x: number, digits = 4) => {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};

/** Nearest-rank percentiles. */
export function distribution(s: Samples): Distribution {
  const v = s.sorted();
  const n = v.length;
  if (n === 0) return { count: 0, mean: 0, p50: 0, p95: 0, p99: 0, max: 0 };
  const q = (p: number) => round(v[Math.min(n - 1, Math.max(0, Math.ceil(p * n) - 1))]!);
  let sum = 0;
  for (let i = 0; i < n; i++) sum += v[i]!;
  return { count: n, mean: round(sum / n), p50: q(0.5), p95: q(0.95), p99: q(0.99), max: round(v[n - 1]!) };
}

/** The CDF of a distribution at a few points, for the report's chart. */
export function cdfPoints(s: Samples, points = 60): [number, number][] {
  const v = s.sorted();
  if (v.length === 0) return [];
  return Array.from({ length: points + 1 }, (_, i) => {
    const p = i / points;
    return [round(v[Math.min(v.length - 1, Math.floor(p * (v.length - 1)))]!), round(p, 3)];
  });
}

export interface SeriesPoint {
  t: number;
  cpu: number;
  memoryMb: number;
  slots: number;
  distribution: number;
  stranded: number;
}

const RESOURCES = ['cpu', 'memoryMb', 'diskMb', 'slots'] as const;
type Usage = Record<(typeof RESOURCES)[number], number>;

/** Time-weighted utilization per resource: the integral of allocated / capacity. */
export class UsageClock {
  private last = 0;
  private area: Usage = { cpu: 0, memoryMb: 0, diskMb: 0, slots: 0 };
  private span = 0;
  advance(now: number, cluster: Cluster): void {
    const dt = now - this.last;
    if (dt <= 0) return;
    for (const k of RESOURCES) {
      const cap = cluster.capacity[k];
      if (cap > 0) this.area[k] += (dt * cluster.allocated[k]) / cap;
    }
    this.span += dt;
    this.last = now;
  }
  averages(): Usage {
    const s = this.span || 1;
    return {
      cpu: round(this.area.cpu / s),
      memoryMb: round(this.area.memoryMb / s),
      diskMb: round(this.area.diskMb / s),
      slots: round(this.area.slots / s),
    };
  }
}

/**
 * Diego's distribution score: sd / mean of memory in use per worker (0 = perfectly even).
 * Where no job asks for memory, slots in use stand in, so the score still says something.
 */
export function distributionScore(cluster: Cluster): number {
  const live = cluster.workers.filter((w) => w.state === 'active');
  if (live.length === 0) return 0;
  const key = cluster.allocated.memoryMb > 0 ? 'memoryMb' : 'slots';
  const used = live.map((w) => w.allocated[key]);
  const mean = used.reduce((a, b) => a + b, 0) / used.length;
  if (mean === 0) return 0;
  const sd = Math.sqrt(used.reduce((a, u) => a + (u - mean) ** 2, 0) / used.length);
  return sd / mean;
}

/**
 * Stranded capacity: the share of all slots that are free on active workers which no waiting job
 * fits (its resources exceed what is free there, or its constraints rule the worker out).
 * 0 when nothing waits: free capacity with no demand is idle, not stranded.
 */
export function strandedShare(cluster: Cluster): number {
  const waiting = [...cluster.shapes.values()].filter((s) => s.waiting > 0);
  if (waiting.length === 0 || cluster.capacity.slots === 0) return 0;
  cluster.refreshAll();
  let stranded = 0;
  for (const w of cluster.workers) {
    const free = w.capacity.slots - w.allocated.slots;
    if (w.state !== 'active' || free <= 0) continue;
    const usable = w.shapes.some((s) => s.waiting > 0 && fitsFree(s.rep.constraints.resources ?? {}, w));
    if (!usable) stranded += free;
  }
  return stranded / cluster.capacity.slots;
}

function fitsFree(need: { cpu?: number; memoryMb?: number; diskMb?: number }, w: Cluster['workers'][number]) {
  return (
    (need.cpu ?? 0) <= w.capacity.cpu - w.allocated.cpu &&
    (need.memoryMb ?? 0) <= w.capacity.memoryMb - w.allocated.memoryMb &&
    (need.diskMb ?? 0) <= w.capacity.diskMb - w.allocated.diskMb
  );
}

export { round };
