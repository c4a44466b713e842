// Nomad's bin-pack and spread fit, the affinity ranker, and job order.
import { capacity, makeJob, makeWorker } from '../../placement/fixtures.js';
import {
  affinity,
  binpack,
  compareJobs,
  scoreFitBinPack,
  scoreFitSpread,
  spread,
  type Capacity,
  type LabelPreference,
  type PlacementJob,
} from '../../placement/index.js';

const ctx = { now: 0 };

describe('Nomad ScoreFitBinPack / ScoreFitSpread: total = 10^freeCpu + 10^freeMem; binpack = 20 - total, spread = total - 2, clamped to [0, 18]', () => {
  test.each([
    // total = 10^0 + 10^0 = 2; binpack 18; spread 0
    { name: 'almost filled node, but with just enough hole', freeCpu: 0, freeMem: 0, binpack: 18, spread: 0 },
    // total = 10 + 10 = 20; binpack 0; spread 18
    { name: 'unutilized node', freeCpu: 1, freeMem: 1, binpack: 0, spread: 18 },
    // total = 2 * 10^0.5 = 6.32456; binpack 13.675; spread 4.325
    { name: 'mid-case scenario', freeCpu: 0.5, freeMem: 0.5, binpack: 13.675, spread: 4.325 },
    // total = 10^-0.5 + 1 = 1.316; binpack 18.68 -> 18; spread -0.68 -> 0
    { name: 'overfit node is clamped', freeCpu: -0.5, freeMem: 0, binpack: 18, spread: 0 },
  ])('$name', (c) => {
    expect(scoreFitBinPack(c.freeCpu, c.freeMem)).toBeCloseTo(c.binpack, 3);
    expect(scoreFitSpread(c.freeCpu, c.freeMem)).toBeCloseTo(c.spread, 3);
  });
});

describe('binpack and spread rankers: Nomad fit * 100 / 18, free fractions after placing the job', () => {
  test.each<{
    name: string;
    request: { cpu?: number; memoryMb?: number };
    capacity: Partial<Capacity>;
    allocated?: Partial<Capacity>;
    binpack: number;
    spread: number;
  }>([
    // free cpu 1 - 1024/2048 = 0.5, memory 1 - 2048/4096 = 0.5; binpack 13.67544 * 100/18 = 75.97469; spread 4.32456 * 100/18 = 24.02531
    {
      name: 'half used after placing',
      request: { cpu: 1024, memoryMb: 2048 },
      capacity: { cpu: 2048, memoryMb: 4096 },
      binpack: 75.97469,
      spread: 24.02531,
    },
    // free cpu 1 - (500+250)/1000 = 0.25, memory 1; total = 1.77828 + 10 = 11.77828; binpack 8.22172 -> 45.67623; spread 9.77828 -> 54.32377
    {
      name: 'cpu mostly used, memory idle',
      request: { cpu: 250 },
      capacity: { cpu: 1000, memoryMb: 1000 },
      allocated: { cpu: 500 },
      binpack: 45.67623,
      spread: 54.32377,
    },
    // free 0 and 0: total 2; binpack 18 -> 100; spread 0
    {
      name: 'exactly full after placing',
      request: { cpu: 1000, memoryMb: 1000 },
      capacity: { cpu: 1000, memoryMb: 1000 },
      binpack: 100,
      spread: 0,
    },
    // free 1 and 1: total 20; binpack 0; spread 18 -> 100
    {
      name: 'idle and nothing requested',
      request: {},
      capacity: { cpu: 1000, memoryMb: 1000 },
      binpack: 0,
      spread: 100,
    },
    // free cpu 1 - 1500/1000 = -0.5: binpack clamped to 18 -> 100; spread clamped to 0
    {
      name: 'overcommitted',
      request: { cpu: 500 },
      capacity: { cpu: 1000, memoryMb: 1000 },
      allocated: { cpu: 1000, memoryMb: 1000 },
      binpack: 100,
      spread: 0,
    },
    // capacity 0 counts as full (free 0): total 2; binpack 100; spread 0
    { name: 'zero capacity counts as full', request: {}, capacity: {}, binpack: 100, spread: 0 },
  ])('$name', (c) => {
    const job = makeJob({ constraints: { resources: c.request } });
    const worker = makeWorker({ capacity: capacity({ slots: 4, ...c.capacity }), allocated: capacity(c.allocated) });
    expect(binpack().score(job, worker, ctx)).toBeCloseTo(c.binpack, 4);
    expect(spread().score(job, worker, ctx)).toBeCloseTo(c.spread, 4);
  });
});

describe('affinity: 100 * sum(matched weights) / sum(all weights)', () => {
  const gpu3zone1: LabelPreference[] = [
    { labels: { gpu: 'a100' }, weight: 3 },
    { labels: { zone: 'a' }, weight: 1 },
  ];
  test.each<{ name: string; preferences: LabelPreference[]; labels: Record<string, string>; expected: number }>([
    // no preferences: 0 on every worker
    { name: 'no preferences', preferences: [], labels: { gpu: 'a100' }, expected: 0 },
    // 100 * 3 / (3+1) = 75
    { name: 'heavier preference met', preferences: gpu3zone1, labels: { gpu: 'a100' }, expected: 75 },
    // 100 * 1 / 4 = 25
    { name: 'lighter preference met', preferences: gpu3zone1, labels: { zone: 'a' }, expected: 25 },
    // 100 * 4 / 4 = 100
    { name: 'both met', preferences: gpu3zone1, labels: { gpu: 'a100', zone: 'a' }, expected: 100 },
    // 100 * 0 / 4 = 0
    { name: 'none met', preferences: gpu3zone1, labels: { gpu: 't4' }, expected: 0 },
    // set membership: 100 * 2 / (2+1) = 66.667
    {
      name: 'set membership',
      preferences: [
        { labels: { gpu: ['a100', 'h100'] }, weight: 2 },
        { labels: { zone: 'b' }, weight: 1 },
      ],
      labels: { gpu: 'h100', zone: 'a' },
      expected: 200 / 3,
    },
    // a preference matches only if all its labels match: 0 / 1
    {
      name: 'multi-label preference needs all',
      preferences: [{ labels: { gpu: 'a100', zone: 'a' }, weight: 1 }],
      labels: { gpu: 'a100' },
      expected: 0,
    },
  ])('$name', ({ preferences, labels, expected }) => {
    expect(affinity().score(makeJob({ preferences }), makeWorker({ labels }), ctx)).toBeCloseTo(expected, 9);
  });
});

describe('compareJobs: priority desc, then createdAt asc, then id asc', () => {
  const job = (id: number, priority: number, createdAt: number): PlacementJob => makeJob({ id, priority, createdAt });
  test.each([
    { name: 'higher priority first', a: job(1, 5, 200), b: job(2, 0, 100), sign: -1 },
    { name: 'same priority: older first', a: job(1, 0, 200), b: job(2, 0, 100), sign: 1 },
    { name: 'same priority and age: lower id first', a: job(7, 0, 100), b: job(3, 0, 100), sign: 1 },
    { name: 'identical order', a: job(3, 0, 100), b: job(3, 0, 100), sign: 0 },
    { name: 'negative priority last', a: job(1, -10, 0), b: job(2, 0, 999), sign: 1 },
  ])('$name', ({ a, b, sign }) => {
    expect(Math.sign(compareJobs(a, b))).toBe(sign);
  });

  test('sorts a queue', () => {
    const queue = [job(1, 0, 100), job(2, 5, 200), job(3, 5, 100), job(4, 0, 100)];
    expect([...queue].sort(compareJobs).map((j) => j.id)).toEqual([3, 2, 1, 4]);
  });
});
