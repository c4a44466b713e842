// A discrete-event simulation of one workload under pull and central placement, driven by the
// same filters and rankers as the server. Deterministic for a seed.
import {
  allocate,
  buildPlacementConfig,
  compareJobs,
  defaultFilters,
  firstFailure,
  freeCapacity,
  jobRequest,
  mulberry32,
  neverFitsReason,
  place,
  rankJobsForWorker,
  type PlacementConfig,
  type PlacementJob,
  type PlacementWorker,
} from '../placement/index.js';
import type { Workload } from './workload.js';

export type Mode = 'pull' | 'central';

export interface SimResult {
  mode: Mode;
  jobs: number;
  completed: number;
  /** Jobs that no worker could ever run, with the grouped reasons of one of them per class. */
  unplaceable: { count: number; reasons: Record<string, string> };
  stillWaiting: number;
  waitSeconds: { p50: number; p95: number; p99: number; max: number };
  /** Time-averaged share of all cpu in use. */
  cpuUtilization: number;
  /** Time-averaged spread (standard deviation) of cpu use across workers: lower is more even. */
  cpuImbalance: number;
  /** Invariant checks: each must be 0. */
  violations: { constraint: number; capacity: number };
}

interface SimJob extends PlacementJob {
  className: string;
  arrival: number;
  runSeconds: number;
  start?: number;
}
type Event = { at: number; seq: number; run: () => void };

class EventQueue {
  private heap: Event[] = [];
  private seq = 0;
  push(at: number, run: () => void) {
    this.heap.push({ at, seq: this.seq++, run });
    let i = this.heap.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(this.heap[i], this.heap[p])) break;
      [this.heap[i], this.heap[p]] = [this.heap[p], this.heap[i]];
      i = p;
    }
  }
  pop(): Event | undefined {
    const top = this.heap[0];
    const last = this.heap.pop();
    if (this.heap.length > 0 && last) {
      this.heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1,
          r = l + 1;
        let m = i;
        if (l < this.heap.length && before(this.heap[l], this.heap[m])) m = l;
        if (r < this.heap.length && before(this.heap[r], this.heap[m])) m = r;
        if (m === i) break;
        [this.heap[i], this.heap[m]] = [this.heap[m], this.heap[i]];
        i = m;
      }
    }
    return top;
  }
}
const before = (a: Event, b: Event) => a.at < b.at || (a.at === b.at && a.seq < b.seq);

/** Arrivals for every class, from the seed: the same jobs in the same order for every mode. */
export function generateJobs(w: Workload): SimJob[] {
  const rand = mulberry32(w.seed);
  const exp = (mean: number) => -Math.log(1 - rand()) * mean;
  const jobs: SimJob[] = [];
  for (const c of w.jobs) {
    for (let t = exp(1 / c.ratePerSecond); t < w.arrivalSeconds; t += exp(1 / c.ratePerSecond)) {
      jobs.push({
        id: 0,
        queue: 'default',
        priority: c.priority,
        createdAt: t * 1000,
        constraints: c.constraints,
        preferences: c.preferences,
        className: c.name,
        arrival: t,
        runSeconds: exp(c.meanRunSeconds),
      });
    }
  }
  jobs.sort((a, b) => a.arrival - b.arrival);
  jobs.forEach((j, i) => (j.id = i + 1));
  return jobs;
}

export function makeWorkers(w: Workload): PlacementWorker[] {
  return w.workers.flatMap((g, gi) =>
    Array.from({ length: g.count }, (_, i) => ({
      id: `g${gi}-${String(i).padStart(4, '0')}`,
      name: `${g.region ?? 'any'}-${gi}-${i}`,
      region: g.region ?? null,
      labels: g.labels,
      state: 'active' as const,
      capacity: { ...g.capacity },
      allocated: { cpu: 0, memoryMb: 0, diskMb: 0, slots: 0 },
      lastSeenAt: 0,
    })),
  );
}

export function simulate(w: Workload, mode: Mode): SimResult {
  const config: PlacementConfig = buildPlacementConfig({ rankers: w.placement.rankers });
  const jobs = generateJobs(w);
  const workers = new Map(makeWorkers(w).map((x) => [x.id, x]));
  const all = [...workers.values()];
  const queue = new EventQueue();
  const pending: SimJob[] = [];
  const unplaceable: SimJob[] = [];
  const reasons: Record<string, string> = {};
  const waits: number[] = [];
  const violations = { constraint: 0, capacity: 0 };
  const rand = mulberry32(w.seed ^ 0x5eed);
  let now = 0;
  let completed = 0;
  let usage = { lastAt: 0, cpuArea: 0, spreadArea: 0 };
  const totalCpu = all.reduce((n, x) => n + x.capacity.cpu, 0) || 1;

  const account = () => {
    const dt = now - usage.lastAt;
    const shares = all.map((x) => (x.capacity.cpu ? x.allocated.cpu / x.capacity.cpu : 0));
    const mean = shares.reduce((a, b) => a + b, 0) / shares.length;
    const sd = Math.sqrt(shares.reduce((a, s) => a + (s - mean) ** 2, 0) / shares.length);
    usage = {
      lastAt: now,
      cpuArea: usage.cpuArea + (dt * all.reduce((n, x) => n + x.allocated.cpu, 0)) / totalCpu,
      spreadArea: usage.spreadArea + dt * sd,
    };
  };

  const start = (job: SimJob, workerId: string, delay: number) => {
    const worker = workers.get(workerId)!;
    if (
      firstFailure(
        job,
        { ...worker, allocated: { cpu: 0, memoryMb: 0, diskMb: 0, slots: 0 } },
        defaultFilters.filter((f) => f.name !== 'resources'),
        { now: now * 1000 },
      )
    )
      violations.constraint++;
    const free = freeCapacity(worker);
    const need = jobRequest(job);
    if (need.cpu > free.cpu || need.memoryMb > free.memoryMb || need.diskMb > free.diskMb || free.slots < 1)
      violations.capacity++;
    account();
    workers.set(workerId, allocate(worker, job));
    syncAll();
    queue.push(now + delay, () => {
      job.start = now;
      waits.push(job.start - job.arrival);
      queue.push(now + job.runSeconds, () => finish(job, workerId));
    });
  };

  const finish = (job: SimJob, workerId: string) => {
    account();
    const worker = workers.get(workerId)!;
    const need = jobRequest(job);
    workers.set(workerId, {
      ...worker,
      allocated: {
        cpu: worker.allocated.cpu - need.cpu,
        memoryMb: worker.allocated.memoryMb - need.memoryMb,
        diskMb: worker.allocated.diskMb - need.diskMb,
        slots: worker.allocated.slots - 1,
      },
    });
    syncAll();
    completed++;
    if (mode === 'pull') pullClaim(workerId);
    else scheduleSoon();
  };

  const syncAll = () => all.splice(0, all.length, ...workers.values());

  // Pull: a worker with room takes the pending jobs that pass its filters, in queue order.
  const pullClaim = (workerId: string) => {
    const worker = workers.get(workerId)!;
    const { claim } = rankJobsForWorker(pending, worker, {
      filters: config.filters,
      ctx: { now: now * 1000 },
      max: freeCapacity(worker).slots,
    });
    for (const job of claim) {
      pending.splice(pending.indexOf(job as SimJob), 1);
      start(job as SimJob, workerId, 0);
    }
  };

  // Central: the scheduler places pending jobs in order on the best-ranked worker.
  let scheduled = false;
  const scheduleSoon = () => {
    if (scheduled) return;
    scheduled = true;
    queue.push(Math.ceil(now / w.central.intervalSeconds + 1e-9) * w.central.intervalSeconds, () => {
      scheduled = false;
      for (const job of [...pending].sort(compareJobs) as SimJob[]) {
        const { chosen } = place(job, [...workers.values()], {
          ...config,
          ctx: { now: now * 1000 },
          tieBreak: { seed: w.seed },
        });
        if (!chosen) continue;
        pending.splice(pending.indexOf(job), 1);
        start(job, chosen.id, w.central.startDelaySeconds);
      }
    });
  };

  for (const job of jobs) {
    queue.push(job.arrival, () => {
      const never = neverFitsReason(job, [...workers.values()], { now: now * 1000 });
      if (never) {
        unplaceable.push(job);
        reasons[job.className] ??= never;
        return;
      }
      pending.push(job);
      if (mode === 'central') return scheduleSoon();
      // Idle long-polls answer in a random order: whoever claims first gets the job.
      const order = [...workers.keys()].sort(() => rand() - 0.5);
      queue.push(now + w.pull.wakeDelaySeconds, () => order.forEach((id) => pullClaim(id)));
    });
  }

  const end = w.arrivalSeconds + w.drainSeconds;
  for (let e = queue.pop(); e && e.at <= end; e = queue.pop()) {
    now = e.at;
    e.run();
  }
  account();
  waits.sort((a, b) => a - b);
  const q = (p: number) => (waits.length ? round(waits[Math.min(waits.length - 1, Math.floor(p * waits.length))]) : 0);
  return {
    mode,
    jobs: jobs.length,
    completed,
    unplaceable: { count: unplaceable.length, reasons },
    stillWaiting: pending.length,
    waitSeconds: { p50: q(0.5), p95: q(0.95), p99: q(0.99), max: waits.length ? round(waits[waits.length - 1]) : 0 },
    cpuUtilization: round(usage.cpuArea / (now || 1)),
    cpuImbalance: round(usage.spreadArea / (now || 1)),
    violations,
  };
}

const round = (x: number) => Math.round(x * 1000) / 1000;
