// The Kubernetes rankers (least- and most-allocated) against the cases of their own tests.
import { capacity, makeJob, makeWorker } from '../../placement/fixtures.js';
import {
  affinity,
  binpack,
  leastAllocated,
  mostAllocated,
  spread,
  type Capacity,
  type ResourceWeights,
} from '../../placement/index.js';

const ctx = { now: 0 };

interface AllocationCase {
  name: string;
  request: { cpu?: number; memoryMb?: number; diskMb?: number };
  capacity: Partial<Capacity>;
  allocated?: Partial<Capacity>;
  resourceWeights?: ResourceWeights;
  expected: number;
}

function scoreWith(factory: typeof leastAllocated, c: AllocationCase): number {
  const ranker = factory(c.resourceWeights ? { resourceWeights: c.resourceWeights } : {});
  const job = makeJob({ constraints: { resources: c.request } });
  const worker = makeWorker({ capacity: capacity({ slots: 4, ...c.capacity }), allocated: capacity(c.allocated) });
  return ranker.score(job, worker, ctx);
}

// The cases of Kubernetes' least_allocated_test.go, with "existing pods" as allocated.
describe('least-allocated (Kubernetes LeastAllocated): ((capacity - requested) * 100) / capacity, weighted integer mean', () => {
  test.each<AllocationCase>([
    // cpu (4000-0)*100/4000 = 100; memory (10000-0)*100/10000 = 100; (100+100)/2 = 100
    {
      name: 'nothing allocated, nothing requested',
      request: {},
      capacity: { cpu: 4000, memoryMb: 10000 },
      expected: 100,
    },
    // cpu (4000-3000)*100/4000 = 25; memory (10000-5000)*100/10000 = 50; (25+50)/2 = 37
    {
      name: 'requested, node 1',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 4000, memoryMb: 10000 },
      expected: 37,
    },
    // cpu (6000-3000)*100/6000 = 50; memory (10000-5000)*100/10000 = 50; (50+50)/2 = 50
    {
      name: 'requested, bigger node 2',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 6000, memoryMb: 10000 },
      expected: 50,
    },
    // cpu (10000-6000)*100/10000 = 40; memory (20000-0)*100/20000 = 100; (40+100)/2 = 70
    {
      name: 'allocated, nothing requested',
      request: {},
      capacity: { cpu: 10000, memoryMb: 20000 },
      allocated: { cpu: 6000 },
      expected: 70,
    },
    // cpu (10000-6000)*100/10000 = 40; memory (20000-5000)*100/20000 = 75; (40+75)/2 = 57
    {
      name: 'allocated cpu and memory, nothing requested',
      request: {},
      capacity: { cpu: 10000, memoryMb: 20000 },
      allocated: { cpu: 6000, memoryMb: 5000 },
      expected: 57,
    },
    // requested = allocated + request: cpu 3000+3000, memory 0+5000; cpu 40; memory 75; (40+75)/2 = 57
    {
      name: 'allocated and requested',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 10000, memoryMb: 20000 },
      allocated: { cpu: 3000 },
      expected: 57,
    },
    // cpu 6000 -> 40; memory 5000+5000 = 10000 -> (20000-10000)*100/20000 = 50; (40+50)/2 = 45
    {
      name: 'allocated and requested, more memory',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 10000, memoryMb: 20000 },
      allocated: { cpu: 3000, memoryMb: 5000 },
      expected: 45,
    },
    // cpu 40; memory (50000-10000)*100/50000 = 80; (40+80)/2 = 60
    {
      name: 'differently sized nodes',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 10000, memoryMb: 50000 },
      allocated: { cpu: 3000, memoryMb: 5000 },
      expected: 60,
    },
    // cpu 3000+3000 = 6000 > 4000 -> 0; memory (10000-0)*100/10000 = 100; (0+100)/2 = 50
    {
      name: 'requested exceeds capacity',
      request: { cpu: 3000 },
      capacity: { cpu: 4000, memoryMb: 10000 },
      allocated: { cpu: 3000 },
      expected: 50,
    },
    // cpu 6000 > 4000 -> 0; memory (10000-5000)*100/10000 = 50; (0+50)/2 = 25
    {
      name: 'requested exceeds capacity, memory used',
      request: { cpu: 3000 },
      capacity: { cpu: 4000, memoryMb: 10000 },
      allocated: { cpu: 3000, memoryMb: 5000 },
      expected: 25,
    },
    // capacity 0 -> 0 for each resource
    { name: 'zero capacity', request: {}, capacity: {}, allocated: { cpu: 3000 }, expected: 0 },
    // cpu 25, memory 50; (25*1 + 50*2)/(1+2) = 125/3 = 41
    {
      name: 'weights memory 2, cpu 1',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 4000, memoryMb: 10000 },
      resourceWeights: { memoryMb: 2, cpu: 1 },
      expected: 41,
    },
    // cpu 50, memory 50; (50*1 + 50*2)/3 = 50
    {
      name: 'weights memory 2, cpu 1, node 2',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 6000, memoryMb: 10000 },
      resourceWeights: { memoryMb: 2, cpu: 1 },
      expected: 50,
    },
    // cpu (3000-1000)*100/3000 = 66.6 -> 66; memory (3000-2000)*100/3000 = 33.3 -> 33; (66+33)/2 = 49.5 -> 49
    {
      name: 'integer division at each step',
      request: { cpu: 1000, memoryMb: 2000 },
      capacity: { cpu: 3000, memoryMb: 3000 },
      expected: 49,
    },
    // cpu (4000-1000)*100/4000 = 75; memory 75; disk (100000-75000)*100/100000 = 25; (75+75+25*2)/4 = 50
    {
      name: 'disk weighted 2',
      request: { cpu: 1000, memoryMb: 2500, diskMb: 25000 },
      capacity: { cpu: 4000, memoryMb: 10000, diskMb: 100000 },
      allocated: { diskMb: 50000 },
      resourceWeights: { cpu: 1, memoryMb: 1, diskMb: 2 },
      expected: 50,
    },
  ])('$name -> $expected', (c) => {
    expect(scoreWith(leastAllocated, c)).toBe(c.expected);
  });
});

// The cases of Kubernetes' most_allocated_test.go.
describe('most-allocated (Kubernetes MostAllocated): (min(requested, capacity) * 100) / capacity, weighted integer mean', () => {
  test.each<AllocationCase>([
    // cpu 0*100/4000 = 0; memory 0; (0+0)/2 = 0
    {
      name: 'nothing allocated, nothing requested',
      request: {},
      capacity: { cpu: 4000, memoryMb: 10000 },
      expected: 0,
    },
    // cpu 3000*100/4000 = 75; memory 5000*100/10000 = 50; (75+50)/2 = 62
    {
      name: 'requested, node 1',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 4000, memoryMb: 10000 },
      expected: 62,
    },
    // cpu 3000*100/6000 = 50; memory 50; (50+50)/2 = 50
    {
      name: 'requested, bigger node 2',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 6000, memoryMb: 10000 },
      expected: 50,
    },
    // cpu 6000*100/10000 = 60; memory 0; (60+0)/2 = 30
    {
      name: 'allocated, nothing requested',
      request: {},
      capacity: { cpu: 10000, memoryMb: 20000 },
      allocated: { cpu: 6000 },
      expected: 30,
    },
    // cpu 60; memory 5000*100/20000 = 25; (60+25)/2 = 42
    {
      name: 'allocated cpu and memory, nothing requested',
      request: {},
      capacity: { cpu: 10000, memoryMb: 20000 },
      allocated: { cpu: 6000, memoryMb: 5000 },
      expected: 42,
    },
    // cpu 3000+3000 -> 60; memory 0+5000 -> 25; (60+25)/2 = 42
    {
      name: 'allocated and requested',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 10000, memoryMb: 20000 },
      allocated: { cpu: 3000 },
      expected: 42,
    },
    // cpu 60; memory 10000*100/20000 = 50; (60+50)/2 = 55
    {
      name: 'allocated and requested, more memory',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 10000, memoryMb: 20000 },
      allocated: { cpu: 3000, memoryMb: 5000 },
      expected: 55,
    },
    // cpu 5000*100/5000 = 100; memory 9000*100/10000 = 90; (100+90)/2 = 95
    {
      name: 'requested equals capacity, node 1',
      request: { cpu: 5000, memoryMb: 9000 },
      capacity: { cpu: 5000, memoryMb: 10000 },
      expected: 95,
    },
    // cpu 5000*100/10000 = 50; memory 9000*100/9000 = 100; (50+100)/2 = 75
    {
      name: 'requested equals capacity, node 2',
      request: { cpu: 5000, memoryMb: 9000 },
      capacity: { cpu: 10000, memoryMb: 9000 },
      expected: 75,
    },
    // cpu 3000+3000 = 6000 capped at 4000 -> 100; memory 0; (100+0)/2 = 50
    {
      name: 'requested exceeds capacity',
      request: { cpu: 3000 },
      capacity: { cpu: 4000, memoryMb: 10000 },
      allocated: { cpu: 3000 },
      expected: 50,
    },
    // capacity 0 -> 0 for each resource
    { name: 'zero capacity', request: { cpu: 10 }, capacity: {}, expected: 0 },
    // cpu 75, memory 50; (75*1 + 50*2)/3 = 175/3 = 58
    {
      name: 'weights memory 2, cpu 1',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 4000, memoryMb: 10000 },
      resourceWeights: { memoryMb: 2, cpu: 1 },
      expected: 58,
    },
    // cpu 50, memory 50; (50+100)/3 = 50
    {
      name: 'weights memory 2, cpu 1, node 2',
      request: { cpu: 3000, memoryMb: 5000 },
      capacity: { cpu: 6000, memoryMb: 10000 },
      resourceWeights: { memoryMb: 2, cpu: 1 },
      expected: 50,
    },
    // cpu 1000*100/3000 = 33.3 -> 33; memory 2000*100/3000 = 66.6 -> 66; (33+66)/2 = 49.5 -> 49
    {
      name: 'integer division at each step',
      request: { cpu: 1000, memoryMb: 2000 },
      capacity: { cpu: 3000, memoryMb: 3000 },
      expected: 49,
    },
  ])('$name -> $expected', (c) => {
    expect(scoreWith(mostAllocated, c)).toBe(c.expected);
  });
});

describe('least-/most-allocated options (validated as Kubernetes validates NodeResourcesFitArgs)', () => {
  test.each<{ name: string; options: Record<string, unknown>; error: string }>([
    {
      name: 'zero resource weight',
      options: { resourceWeights: { cpu: 0 } },
      error: 'ranker least-allocated: weight of cpu must be an integer 1..100, got 0',
    },
    {
      name: 'negative resource weight',
      options: { resourceWeights: { memoryMb: -1 } },
      error: 'ranker least-allocated: weight of memoryMb must be an integer 1..100, got -1',
    },
    {
      name: 'resource weight over 100',
      options: { resourceWeights: { cpu: 101 } },
      error: 'ranker least-allocated: weight of cpu must be an integer 1..100, got 101',
    },
    {
      name: 'unknown resource',
      options: { resourceWeights: { gpu: 1 } },
      error: 'ranker least-allocated: unknown resource gpu (known: cpu, memoryMb, diskMb)',
    },
    {
      name: 'no resources',
      options: { resourceWeights: {} },
      error: 'ranker least-allocated: resourceWeights must name at least one resource',
    },
    {
      name: 'negative ranker weight',
      options: { weight: -1 },
      error: 'ranker least-allocated: weight must be a finite number ≥ 0, got -1',
    },
    {
      name: 'misspelt option',
      options: { resourceWeight: { cpu: 1 } },
      error: 'ranker least-allocated: unknown option resourceWeight (accepted: resourceWeights)',
    },
  ])('$name', ({ options, error }) => {
    expect(() => leastAllocated(options)).toThrow(error);
  });

  test('weight defaults to 1 and names are fixed', () => {
    expect(
      [leastAllocated(), mostAllocated({ weight: 3 }), binpack(), spread(), affinity({ weight: 2 })].map((r) => [
        r.name,
        r.weight,
      ]),
    ).toEqual([
      ['least-allocated', 1],
      ['most-allocated', 3],
      ['binpack', 1],
      ['spread', 1],
      ['affinity', 2],
    ]);
  });
});

// Nomad's TestScoreFitBinPack (nomad/structs/funcs_test.go): node 2048 cpu / 4096 MB after reserved.
