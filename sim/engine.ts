// The discrete-event core: virtual time, an event queue, and the job and worker lifecycle every
// model shares (arrive, place, start, finish; workers join, fail and drain; the reaper's requeue).
// A model only decides where and when pending jobs go.
import { neverFitsReason, type Capacity, type PlacementConfig, type PlacementWorker } from '../placement/index.js';
import type { Arrival } from './arrivals.js';
import { Cluster, type SimJob, type SimWorker } from './cluster.js';
import { Heap } from './heap.js';
import { distributionScore, Samples, strandedShare, UsageClock, type SeriesPoint } from './metrics.js';
import { stream, type Rng } from './random.js';
import type { Costs, ModelParams, WorkerGroup } from './workload.js';

export interface Model {
  /** A job became pending: it arrived, was requeued by the reaper, or was refused at commit. */
  onPending(job: SimJob): void;
  /** A worker has room again (a job ended, or it joined). */
  onFreed(worker: SimWorker): void;
  /** A worker failed or began draining; p2c hands back what was queued on it. */
  onLeave?(worker: SimWorker, failed: boolean): void;
}

interface Event {
  at: number;
  seq: number;
  run: () => void;
}

/** Modeled database statements, by kind. */
export interface Statements {
  enqueue: number;
  claim: number;
  emptyClaim: number;
  schedulerPass: number;
  assign: number;
  release: number;
  heartbeat: number;
  requeue: number;
}

export class Engine {
  now = 0;
  model!: Model;
  readonly cluster: Cluster;
  readonly rng: Rng;
  readonly waits = new Samples();
  readonly placementLatency = new Samples();
  readonly waitsByClass = new Map<string, Samples>();
  readonly unplaceable = new Map<string, { count: number; reason: string }>();
  readonly stmts: Statements = {
    enqueue: 0,
    claim: 0,
    emptyClaim: 0,
    schedulerPass: 0,
    assign: 0,
    release: 0,
    heartbeat: 0,
    requeue: 0,
  };
  readonly counts = { jobs: 0, completed: 0, lost: 0, refused: 0, failed: 0, probes: 0 };
  readonly series: SeriesPoint[] = [];
  readonly usage = new UsageClock();
  lastFinish = 0;
  private events = new Heap<Event>((a, b) => a.at < b.at || (a.at === b.at && a.seq < b.seq));
  private seq = 0;
  private nextId = 1;
  private workerSeq = 0;

  constructor(
    readonly config: PlacementConfig,
    readonly costs: Costs,
    readonly modelParams: ModelParams,
    seed: number,
  ) {
    this.cluster = new Cluster(config.filters);
    // The models' own stream; arrivals and run times use 0..2×classes, so they never overlap.
    this.rng = stream(seed, 100_000);
  }

  at(t: number, run: () => void): void {
    this.events.push({ at: Math.max(t, this.now), seq: this.seq++, run });
  }

  /** Runs until nothing is left to happen or `until` passes; `progress` hears every 2^16 events. */
  run(until: number, progress?: (now: number) => void): void {
    let n = 0;
    for (let e = this.events.pop(); e && e.at <= until; e = this.events.pop()) {
      this.usage.advance(e.at, this.cluster);
      this.now = e.at;
      e.run();
      if (progress && (++n & 0xffff) === 0) progress(this.now);
    }
  }

  /** Feeds arrivals one at a time: each schedules the next. */
  feed(next: () => Arrival | null): void {
    const a = next();
    if (a) this.at(a.arrival, () => (this.arrive(a), this.feed(next)));
  }

  arrive(a: Arrival): void {
    const id = this.nextId++;
    // Every field written here, in one order: one hidden class for all jobs keeps the hot path fast.
    const job: SimJob = {
      id,
      queue: a.queue,
      priority: a.priority,
      createdAt: a.arrival * 1000,
      constraints: a.constraints,
      preferences: a.preferences,
      className: a.className,
      classIndex: classIndex(a.className),
      arrival: a.arrival,
      readyAt: this.now,
      runAt: this.now,
      runSeconds: a.runSeconds,
      shape: null as unknown as SimJob['shape'],
      state: 'pending',
      worker: null,
      epoch: 0,
      resubmits: 0,
      reservations: 0,
      startedAt: 0,
    };
    job.shape = this.cluster.refresh(this.cluster.shapeOf(job));
    this.counts.jobs++;
    if (job.shape.candidates.length === 0) return this.refuse(job);
    this.stmts.enqueue++;
    job.shape.waiting++;
    this.model.onPending(job);
  }

  /** Enqueue's 422: no live worker could ever run it. Reasons grouped as the server groups them. */
  private refuse(job: SimJob): void {
    const entry = this.unplaceable.get(job.className) ?? {
      count: 0,
      reason: neverFitsReason(job, this.cluster.live(), { now: this.now * 1000 }) ?? 'no worker',
    };
    entry.count++;
    this.unplaceable.set(job.className, entry);
    job.state = 'failed';
  }

  /** Reserves the worker's capacity now; the job starts after `delay` (wake-up, round trips). */
  assign(job: SimJob, w: SimWorker, delay: number): void {
    job.state = 'placed';
    job.shape.waiting--;
    this.cluster.allocate(job, w);
    this.placementLatency.push(this.now - job.readyAt);
    const epoch = job.epoch;
    this.at(this.now + delay, () => job.epoch === epoch && this.start(job));
  }

  /** Gives back a placement that will not happen (an auction cell refused it at commit). */
  unassign(job: SimJob): void {
    job.epoch++;
    this.cluster.release(job);
    job.state = 'pending';
    job.shape.waiting++;
  }

  private start(job: SimJob): void {
    job.state = 'running';
    const wait = this.now - job.readyAt;
    this.waits.push(wait);
    let byClass = this.waitsByClass.get(job.className);
    if (!byClass) this.waitsByClass.set(job.className, (byClass = new Samples()));
    byClass.push(wait);
    this.stmts.heartbeat += Math.floor(job.runSeconds / this.costs.heartbeatSeconds);
    const epoch = job.epoch;
    job.startedAt = this.now;
    this.at(this.now + job.runSeconds, () => job.epoch === epoch && this.finish(job));
  }

  private finish(job: SimJob): void {
    const w = job.worker!;
    job.state = 'done';
    this.cluster.release(job);
    this.counts.completed++;
    this.stmts.release++;
    this.lastFinish = this.now;
    if (w.state === 'draining' && w.jobs.size === 0) this.cluster.setState(w, 'gone');
    else if (w.state === 'active') this.model.onFreed(w);
  }

  /** Back to pending, as the reaper or a refused commit does. */
  requeue(job: SimJob): void {
    job.state = 'pending';
    job.readyAt = job.runAt = this.now;
    job.shape.waiting++;
    this.stmts.requeue++;
    this.model.onPending(job);
  }

  /** When the reaper takes a lost lease back: its expiry (last heartbeat + TTL), on the reaper's next pass. */
  reapTime(job: SimJob): number {
    const { heartbeatSeconds: hb, leaseTtlSeconds: ttl, reaperIntervalSeconds: ri } = this.costs;
    const started = job.state === 'running' ? job.startedAt : this.now;
    const lastBeat = started + Math.floor((this.now - started) / hb) * hb;
    return Math.ceil((lastBeat + ttl) / ri) * ri;
  }

  addGroup(g: WorkerGroup, groupIndex: number): void {
    const members: SimWorker[] = [];
    this.at(g.joinAt, () => {
      for (let i = 0; i < g.count; i++) members.push(this.join(g, groupIndex, i));
      for (const w of members) this.model.onFreed(w);
    });
    if (g.failAt !== undefined) this.at(g.failAt, () => members.forEach((w) => this.fail(w)));
    if (g.drainAt !== undefined) this.at(g.drainAt, () => members.forEach((w) => this.drain(w)));
  }

  private join(g: WorkerGroup, groupIndex: number, i: number): SimWorker {
    const zero: Capacity = { cpu: 0, memoryMb: 0, diskMb: 0, slots: 0 };
    const base: PlacementWorker = {
      id: `${g.name ?? `g${groupIndex}`}-${String(i).padStart(5, '0')}`,
      name: `${g.name ?? `g${groupIndex}`}-${i}`,
      region: g.region ?? null,
      labels: g.labels,
      state: 'active',
      capacity: { ...g.capacity },
      allocated: zero,
      lastSeenAt: 0,
      ...(g.queues ? { queues: g.queues } : {}),
    };
    const w: SimWorker = {
      ...base,
      seq: this.workerSeq++,
      jobs: new Set(),
      classCounts: new Map(),
      shapes: [],
      local: [],
    };
    this.cluster.join(w);
    return w;
  }

  /** The machine is gone: its runs are lost, and come back when the reaper sees their leases expire. */
  fail(w: SimWorker): void {
    if (w.state === 'gone') return;
    this.cluster.setState(w, 'gone');
    this.cluster.dropAllocations(w);
    for (const job of [...w.jobs]) {
      const at = this.reapTime(job);
      job.epoch++;
      job.state = 'failed';
      this.cluster.release(job);
      this.counts.lost++;
      this.at(at, () => this.requeue(job));
    }
    this.model.onLeave?.(w, true);
  }

  drain(w: SimWorker): void {
    if (w.state !== 'active') return;
    this.cluster.setState(w, w.jobs.size === 0 ? 'gone' : 'draining');
    this.model.onLeave?.(w, false);
  }

  /** Utilization, spread and stranded capacity now; re-arms itself while anything is scheduled. */
  sample(every: number): void {
    const c = this.cluster;
    const share = (k: keyof Capacity) => (c.capacity[k] > 0 ? c.allocated[k] / c.capacity[k] : 0);
    this.series.push({
      t: this.now,
      cpu: share('cpu'),
      memoryMb: share('memoryMb'),
      slots: share('slots'),
      distribution: distributionScore(c),
      stranded: strandedShare(c),
    });
    if (this.events.size > 0) this.at(this.now + every, () => this.sample(every));
  }
}

// Class names are few; a global table keeps the per-worker class counts as small integers.
const classes = new Map<string, number>();
function classIndex(name: string): number {
  let i = classes.get(name);
  if (i === undefined) classes.set(name, (i = classes.size));
  return i;
}
