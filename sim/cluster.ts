// The simulated cluster: workers indexed by region, jobs grouped by shape (the same queue,
// region, labels and resources fit the same workers), and capacity bookkeeping that checks the
// invariants independently of the filters the models placed with.
import {
  firstFailure,
  jobRequest,
  queueFilter,
  selectorMatches,
  valueMatches,
  type Capacity,
  type Filter,
  type PlacementJob,
  type PlacementWorker,
} from '../placement/index.js';
import { Heap, IndexedSet } from './heap.js';

export interface SimJob extends PlacementJob {
  className: string;
  classIndex: number;
  arrival: number;
  /** When it last became pending (arrival or requeue): waits count from here. */
  readyAt: number;
  /** The claim order's run_at. */
  runAt: number;
  runSeconds: number;
  shape: Shape;
  state: 'pending' | 'placed' | 'running' | 'done' | 'failed';
  worker: SimWorker | null;
  /** Bumped when a run is lost, so its pending events turn into no-ops. */
  epoch: number;
  resubmits: number;
  /** p2c late binding: live reservations on worker queues. */
  reservations: number;
  startedAt: number;
}

export interface SimWorker extends PlacementWorker {
  seq: number;
  jobs: Set<SimJob>;
  classCounts: Map<number, number>;
  /** The shapes this worker could run when idle: where its free slots are indexed. */
  shapes: Shape[];
  /** p2c: jobs (or reservations) queued on the worker itself. */
  local: SimJob[];
}

/** Jobs that fit the same workers. Pending jobs sit in claim order; free fitting workers in a set. */
export interface Shape {
  key: string;
  rep: SimJob;
  pending: Heap<SimJob>;
  /** Pending jobs of any model (p2c queues them on workers), for stranded capacity. */
  waiting: number;
  candidates: SimWorker[];
  free: IndexedSet<SimWorker>;
  epoch: number;
}

/** The server's claim order: priority desc, then run_at, then id. */
export const claimOrder = (a: SimJob, b: SimJob): boolean =>
  a.priority !== b.priority ? a.priority > b.priority : a.runAt !== b.runAt ? a.runAt < b.runAt : a.id < b.id;

const ZERO: Capacity = { cpu: 0, memoryMb: 0, diskMb: 0, slots: 0 };
const KEYS = ['cpu', 'memoryMb', 'diskMb', 'slots'] as const;

export class Cluster {
  readonly workers: SimWorker[] = [];
  readonly shapes = new Map<string, Shape>();
  readonly violations = { constraint: 0, capacity: 0 };
  /** Sums over live workers, for utilization. */
  readonly capacity: Capacity = { ...ZERO };
  readonly allocated: Capacity = { ...ZERO };
  private byRegion = new Map<string | null, SimWorker[]>();
  private byConstraints = new WeakMap<object, Shape>();
  private epoch = 0;

  constructor(private readonly filters: readonly Filter[]) {}

  live(): SimWorker[] {
    return this.workers.filter((w) => w.state === 'active' || w.state === 'draining');
  }

  join(w: SimWorker): void {
    this.workers.push(w);
    const list = this.byRegion.get(w.region) ?? [];
    list.push(w);
    this.byRegion.set(w.region, list);
    for (const k of KEYS) this.capacity[k] += w.capacity[k];
    this.epoch++;
  }

  /** Draining or gone: no new work. Gone also leaves the region index and the capacity sums. */
  setState(w: SimWorker, state: 'draining' | 'gone'): void {
    if (w.state === 'gone') return;
    w.state = state;
    if (state === 'gone') {
      const list = this.byRegion.get(w.region)!;
      list.splice(list.indexOf(w), 1);
      for (const k of KEYS) this.capacity[k] -= w.capacity[k];
    }
    for (const s of w.shapes) s.free.delete(w);
    this.epoch++;
  }

  shapeOf(job: PlacementJob): Shape {
    // Jobs of a class share one constraints object: remember its shape rather than re-keying.
    const known = this.byConstraints.get(job.constraints);
    if (known && known.rep.queue === job.queue) return known;
    const shape = this.shapeByKey(job);
    this.byConstraints.set(job.constraints, shape);
    return shape;
  }

  private shapeByKey(job: PlacementJob): Shape {
    const c = job.constraints;
    const key = JSON.stringify([job.queue, c.region ?? null, c.labels ?? null, jobRequest(job)]);
    let shape = this.shapes.get(key);
    if (!shape) {
      const pending = new Heap<SimJob>(claimOrder);
      shape = { key, rep: job as SimJob, pending, waiting: 0, candidates: [], free: new IndexedSet(), epoch: -1 };
      this.shapes.set(key, shape);
    }
    return shape;
  }

  /** Active workers that could run the shape when idle, found through the region index. */
  refresh(shape: Shape): Shape {
    if (shape.epoch === this.epoch) return shape;
    for (const w of shape.candidates) w.shapes.splice(w.shapes.indexOf(shape), 1);
    const region = shape.rep.constraints.region;
    const regions = region === undefined ? [...this.byRegion.keys()] : [region].flat();
    const filters = [queueFilter, ...this.filters];
    shape.candidates = regions
      .flatMap((r) => this.byRegion.get(r) ?? [])
      .filter((w) => w.state === 'active' && !firstFailure(shape.rep, { ...w, allocated: ZERO }, filters, { now: 0 }))
      .sort((a, b) => a.seq - b.seq);
    shape.free = new IndexedSet();
    for (const w of shape.candidates) {
      w.shapes.push(shape);
      if (w.allocated.slots < w.capacity.slots) shape.free.add(w);
    }
    shape.epoch = this.epoch;
    return shape;
  }

  /** Every shape current, so each worker's `shapes` lists all it could run. */
  refreshAll(): void {
    for (const s of this.shapes.values()) this.refresh(s);
  }

  /** Takes the job's resources on the worker, counting any broken invariant. */
  allocate(job: SimJob, w: SimWorker): void {
    const need = jobRequest(job);
    if (!obeysConstraints(job, w)) this.violations.constraint++;
    for (const k of KEYS) {
      w.allocated[k] += need[k];
      this.allocated[k] += need[k];
    }
    if (KEYS.some((k) => w.allocated[k] > w.capacity[k])) this.violations.capacity++;
    w.jobs.add(job);
    w.classCounts.set(job.classIndex, (w.classCounts.get(job.classIndex) ?? 0) + 1);
    job.worker = w;
    if (w.allocated.slots >= w.capacity.slots) for (const s of w.shapes) s.free.delete(w);
  }

  release(job: SimJob): void {
    const w = job.worker!;
    const need = jobRequest(job);
    for (const k of KEYS) {
      w.allocated[k] -= need[k];
      if (w.state !== 'gone') this.allocated[k] -= need[k];
    }
    w.jobs.delete(job);
    w.classCounts.set(job.classIndex, w.classCounts.get(job.classIndex)! - 1);
    job.worker = null;
    if (w.state === 'active') for (const s of w.shapes) s.free.add(w);
  }

  /** A gone worker's jobs leave the sums at once: its capacity is no longer there. */
  dropAllocations(w: SimWorker): void {
    for (const job of w.jobs) {
      const need = jobRequest(job);
      for (const k of KEYS) this.allocated[k] -= need[k];
    }
  }
}

/** The hard constraints, checked without the filters: a model that skipped one is caught here. */
function obeysConstraints(job: SimJob, w: SimWorker): boolean {
  const c = job.constraints;
  if (w.state !== 'active') return false;
  if (w.queues && !w.queues.includes(job.queue)) return false;
  if (c.region !== undefined && (w.region === null || !valueMatches(w.region, c.region))) return false;
  return !c.labels || selectorMatches(c.labels, w.labels);
}
