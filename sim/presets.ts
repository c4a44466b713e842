// Named workloads for `skipjack simulate --workload NAME`, sized by --workers, --jobs, --rate,
// --mean-service and --seed. Each is a plain workload object, so `--json` users can copy one.
import { workloadSchema, type Workload, type WorkloadInput } from './workload.js';

export interface PresetOptions {
  workers?: number;
  jobs?: number;
  rate?: number;
  meanService?: number;
  seed?: number;
  claimSeconds?: number;
  wakeSeconds?: number;
}

type Preset = { about: string; build: (o: PresetOptions) => WorkloadInput };

/** A window long enough that `jobs` arrivals, not the clock, end the run. */
const windowFor = (jobs: number, rate: number) => (10 * jobs) / rate;

const mmc: Preset = {
  about: 'M/M/c: Poisson arrivals, exponential service, identical one-slot workers, no costs (Erlang C applies)',
  build(o) {
    const c = o.workers ?? 10;
    const s = o.meanService ?? 1;
    const rate = o.rate ?? (0.8 * c) / s;
    const jobs = o.jobs ?? 100_000;
    return {
      seed: o.seed ?? 1,
      maxJobs: jobs,
      arrivalSeconds: windowFor(jobs, rate),
      workers: [{ name: 'w', count: c, capacity: { cpu: 1000, memoryMb: 1024, diskMb: 1024, slots: 1 } }],
      jobs: [{ name: 'mm-c', ratePerSecond: rate, meanRunSeconds: s }],
      costs: { claimSeconds: o.claimSeconds ?? 0, wakeSeconds: o.wakeSeconds ?? 0 },
    };
  },
};

/** Splits n workers by these shares, at least one each. */
const split = (n: number, shares: number[]) => shares.map((s) => Math.max(1, Math.round(n * s)));

const regions: Preset = {
  about: 'three regions, a GPU pool, a class no worker can run; mad workers fail at 40% and ord drains at 70%',
  build(o) {
    const n = o.workers ?? 22;
    const [ord, mad, gpu, madFail, ordDrain] = split(n, [0.45, 0.2, 0.1, 0.1, 0.15]);
    const scale = (o.rate ?? 1) * (n / 22);
    const jobs = o.jobs ?? 20_000;
    const s = o.meanService ?? 20;
    const window = windowFor(jobs, 1.4 * scale) / 10;
    const cap = { cpu: 4000, memoryMb: 8192, slots: 8 };
    return {
      seed: o.seed ?? 7,
      maxJobs: jobs,
      arrivalSeconds: window,
      workers: [
        { name: 'ord', count: ord!, region: 'ord', capacity: cap },
        { name: 'ord-drain', count: ordDrain!, region: 'ord', capacity: cap, drainAt: 0.7 * window },
        { name: 'mad', count: mad!, region: 'mad', capacity: cap },
        { name: 'mad-fail', count: madFail!, region: 'mad', capacity: cap, failAt: 0.4 * window },
        {
          name: 'gpu',
          count: gpu!,
          region: 'mad',
          labels: { gpu: 'a100' },
          capacity: { cpu: 8000, memoryMb: 32768, slots: 4 },
        },
      ],
      jobs: [
        {
          name: 'web-build',
          ratePerSecond: scale,
          meanRunSeconds: s,
          constraints: { resources: { cpu: 1000, memoryMb: 1024 } },
        },
        {
          name: 'mad-deploy',
          ratePerSecond: 0.4 * scale,
          meanRunSeconds: s,
          priority: 10,
          constraints: { region: 'mad', resources: { cpu: 500, memoryMb: 512 } },
        },
        {
          name: 'train',
          ratePerSecond: 0.02 * scale,
          runTime: { kind: 'lognormal', mean: 6 * s, sigma: 0.5 },
          constraints: { labels: { gpu: 'a100' }, resources: { cpu: 4000, memoryMb: 16384 } },
        },
        { name: 'lis-report', ratePerSecond: 0.01 * scale, meanRunSeconds: s, constraints: { region: 'lis' } },
      ],
    };
  },
};

const mixed: Preset = {
  about: 'big and small workers, tiny to large jobs with lognormal run times: packing and stranding matter',
  build(o) {
    const n = o.workers ?? 20;
    const [big, small] = split(n, [0.3, 0.7]);
    const s = o.meanService ?? 30;
    // Offered load ~80% of memory: tiny 0.5 GB, medium 4 GB, large 24 GB.
    const memory = big! * 65536 + small! * 16384;
    const perSecond = (o.rate ?? 1) * ((0.8 * memory) / s / (0.6 * 512 + 0.3 * 4096 + 0.1 * 24576));
    const jobs = o.jobs ?? 20_000;
    const runTime = (mean: number) => ({ kind: 'lognormal' as const, mean, sigma: 1 });
    return {
      seed: o.seed ?? 11,
      maxJobs: jobs,
      arrivalSeconds: windowFor(jobs, perSecond),
      workers: [
        { name: 'big', count: big!, capacity: { cpu: 16000, memoryMb: 65536, slots: 16 } },
        { name: 'small', count: small!, capacity: { cpu: 4000, memoryMb: 16384, slots: 8 } },
      ],
      jobs: [
        {
          name: 'tiny',
          ratePerSecond: 0.6 * perSecond,
          runTime: runTime(s),
          constraints: { resources: { cpu: 250, memoryMb: 512 } },
        },
        {
          name: 'medium',
          ratePerSecond: 0.3 * perSecond,
          runTime: runTime(s),
          constraints: { resources: { cpu: 1000, memoryMb: 4096 } },
        },
        {
          name: 'large',
          ratePerSecond: 0.1 * perSecond,
          runTime: runTime(s),
          constraints: { resources: { cpu: 6000, memoryMb: 24576 } },
        },
      ],
    };
  },
};

const diurnal: Preset = {
  about: 'a day compressed into an hour: arrivals swell to 1.8× and fall to 0.2× the mean, plus bursts',
  build(o) {
    const n = o.workers ?? 20;
    const s = o.meanService ?? 10;
    const rate = (o.rate ?? 1) * ((0.6 * n * 4) / s);
    const jobs = o.jobs ?? 50_000;
    return {
      seed: o.seed ?? 5,
      maxJobs: jobs,
      arrivalSeconds: windowFor(jobs, rate),
      workers: [{ name: 'w', count: n, capacity: { cpu: 4000, memoryMb: 8192, slots: 4 } }],
      jobs: [
        {
          name: 'steady',
          arrivals: { kind: 'diurnal', ratePerSecond: rate, amplitude: 0.8, periodSeconds: 3600 },
          meanRunSeconds: s,
          constraints: { resources: { cpu: 1000 } },
        },
        {
          name: 'deploy-burst',
          arrivals: { kind: 'burst', everySeconds: 900, size: n * 2 },
          runTime: { kind: 'fixed', seconds: s / 2 },
          priority: 5,
          constraints: { resources: { cpu: 500 } },
        },
      ],
    };
  },
};

export const PRESETS: Record<string, Preset> = { 'mm-c': mmc, regions, mixed, diurnal };

export function preset(name: string, o: PresetOptions = {}): Workload {
  return workloadSchema.parse(PRESETS[name]!.build(o));
}
