import { capacity, makeJob, makeWorker } from '../../placement/fixtures.js';
import {
  buildPlacementConfig,
  defaultFilters,
  neverFitsReason,
  place,
  rankJobsForWorker,
  summarizeUnfit,
  type PlacementWorker,
  type Ranker,
  type Verdict,
} from '../../placement/index.js';

const ctx = { now: 0 };
const defaults = buildPlacementConfig(); // filters: worker-active, region, labels, resources; least-allocated ×1, affinity ×2

const constant = (name: string, weight: number, score: (w: PlacementWorker) => number): Ranker => ({
  name,
  weight,
  score: (_job, worker) => score(worker),
});

describe('place: verdicts', () => {
  test('records the first failing filter per worker, and each ranker score plus the weighted mean for the rest', () => {
    const job = makeJob({
      constraints: { region: 'mad', resources: { memoryMb: 1024 } },
      preferences: [{ labels: { gpu: 'a100' }, weight: 1 }],
    });
    const workers = [
      makeWorker({ id: 'w1', name: 'gpu-box', labels: { gpu: 'a100' } }),
      makeWorker({ id: 'w2', name: 'ord-box', region: 'ord' }),
      makeWorker({ id: 'w3', name: 'full-box', allocated: capacity({ memoryMb: 7680 }) }),
      makeWorker({ id: 'w4', name: 'plain-box' }),
    ];
    const result = place(job, workers, { ...defaults, ctx });
    // least-allocated (capacity cpu 4000, memory 8192): cpu (4000-0)*100/4000 = 100;
    //   memory (8192-1024)*100/8192 = 87.5 -> 87; (100+87)/2 = 93.5 -> 93
    // w1: affinity 100*1/1 = 100; total (1*93 + 2*100)/3 = 97.67
    // w4: affinity 0;             total (1*93 + 2*0)/3   = 31
    // w3: free memory 8192 - 7680 = 512 < 1024
    expect(result.verdicts).toEqual<Verdict[]>([
      {
        workerId: 'w1',
        workerName: 'gpu-box',
        fits: true,
        scores: { 'least-allocated': 93, affinity: 100 },
        total: 293 / 3,
      },
      { workerId: 'w2', workerName: 'ord-box', fits: false, filter: 'region', reason: 'region ord≠mad' },
      {
        workerId: 'w3',
        workerName: 'full-box',
        fits: false,
        filter: 'resources',
        reason: 'insufficient memory (need 1024, free 512)',
      },
      {
        workerId: 'w4',
        workerName: 'plain-box',
        fits: true,
        scores: { 'least-allocated': 93, affinity: 0 },
        total: 31,
      },
    ]);
    expect(result.chosen?.id).toBe('w1');
    expect(result.summary).toBe('2/4 workers fit: 1 insufficient memory (need 1024, free 512), 1 region ord≠mad');
  });

  test.each<{ name: string; rankers: Ranker[]; total: number }>([
    // (1*30 + 3*90)/(1+3) = 300/4 = 75
    { name: 'weighted mean', rankers: [constant('a', 1, () => 30), constant('b', 3, () => 90)], total: 75 },
    // weight 0 records the score but ignores it: (0*30 + 1*90)/1 = 90
    { name: 'zero weight ignored', rankers: [constant('a', 0, () => 30), constant('b', 1, () => 90)], total: 90 },
    // no weight at all: 0
    { name: 'all weights zero', rankers: [constant('a', 0, () => 30)], total: 0 },
    { name: 'no rankers', rankers: [], total: 0 },
    // NaN -> 0, 150 -> 100: (0 + 100)/2 = 50
    {
      name: 'misbehaving scores clamped',
      rankers: [constant('nan', 1, () => NaN), constant('big', 1, () => 150)],
      total: 50,
    },
  ])('total: $name = $total', ({ rankers, total }) => {
    const [verdict] = place(makeJob(), [makeWorker()], { filters: defaultFilters, rankers, ctx }).verdicts;
    expect(verdict!.total).toBe(total);
  });
});

describe('place: choice and tie-breaks', () => {
  const tiedWorkers = ['w-c', 'w-a', 'w-d', 'w-b'].map((id) => makeWorker({ id, name: id }));

  test('picks the highest total', () => {
    const workers = [makeWorker({ id: 'w-a', allocated: capacity({ cpu: 2000 }) }), makeWorker({ id: 'w-b' })];
    // least-allocated: w-a cpu (4000-2000)*100/4000 = 50, memory 100 -> 75; w-b 100 -> w-b
    expect(place(makeJob(), workers, { ...defaults, ctx }).chosen?.id).toBe('w-b');
  });

  test('without a seed, ties go to the lowest worker id whatever the input order', () => {
    expect(place(makeJob(), tiedWorkers, { ...defaults, ctx }).chosen?.id).toBe('w-a');
    expect(place(makeJob(), [...tiedWorkers].reverse(), { ...defaults, ctx }).chosen?.id).toBe('w-a');
  });

  test('totals within float noise are a tie: 0.1 + 0.2 vs 0.3', () => {
    const noisy = constant('noisy', 1, (w) => (w.id === 'w-b' ? 0.1 + 0.2 : 0.3));
    const workers = [makeWorker({ id: 'w-b' }), makeWorker({ id: 'w-a' })];
    expect(place(makeJob(), workers, { filters: defaultFilters, rankers: [noisy], ctx }).chosen?.id).toBe('w-a');
  });

  test('a seed draws among the tied, reproducibly from (seed, job id), whatever the input order', () => {
    const pick = (seed: number, jobId: number, workers: PlacementWorker[]) =>
      place(makeJob({ id: jobId }), workers, { ...defaults, ctx, tieBreak: { seed } }).chosen?.id;
    const draws = [1, 2, 3, 4, 5, 6, 7, 8].map((id) => pick(42, id, tiedWorkers));
    expect(draws).toEqual(['w-a', 'w-c', 'w-b', 'w-c', 'w-a', 'w-b', 'w-a', 'w-c']);
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((id) => pick(42, id, [...tiedWorkers].reverse()))).toEqual(draws);
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((id) => pick(2, id, tiedWorkers))).toEqual([
      'w-d',
      'w-a',
      'w-d',
      'w-a',
      'w-a',
      'w-c',
      'w-c',
      'w-b',
    ]);
  });

  test('a seed never overrides a strictly better worker', () => {
    const workers = [...tiedWorkers, makeWorker({ id: 'w-z', labels: { ssd: 'yes' } })];
    const job = makeJob({ preferences: [{ labels: { ssd: 'yes' }, weight: 1 }] });
    for (const seed of [1, 2, 3, 42])
      expect(place(job, workers, { ...defaults, ctx, tieBreak: { seed } }).chosen?.id).toBe('w-z');
  });

  test('no worker fits: chosen is null', () => {
    const result = place(makeJob({ constraints: { region: 'lis' } }), tiedWorkers, { ...defaults, ctx });
    expect(result.chosen).toBeNull();
    expect(result.summary).toBe('0/4 workers fit: 4 region mad≠lis');
  });
});

describe('summary grouping (Kubernetes FitError style)', () => {
  test('0/12 workers fit: region mismatches and memory shortages, the shortage showing the best free value', () => {
    const job = makeJob({ constraints: { region: 'mad', resources: { memoryMb: 1024 } } });
    const inOrd = Array.from({ length: 9 }, (_, i) => makeWorker({ id: `ord-${i}`, region: 'ord' }));
    // free memory 8192 - allocated: 512, 256, 100 -> max 512
    const tight = [7680, 7936, 8092].map((used, i) =>
      makeWorker({ id: `mad-${i}`, allocated: capacity({ memoryMb: used }) }),
    );
    const result = place(job, [...tight, ...inOrd], { ...defaults, ctx });
    expect(result.summary).toBe('0/12 workers fit: 9 region ord≠mad, 3 insufficient memory (need 1024, free ≤ 512)');
  });

  const unfit = (reason: string, filter = 'f'): Verdict => ({
    workerId: reason,
    workerName: reason,
    fits: false,
    filter,
    reason,
  });
  const fit: Verdict = { workerId: 'ok', workerName: 'ok', fits: true, scores: {}, total: 0 };
  test.each<{ name: string; verdicts: Verdict[]; total: number; expected: string }>([
    { name: 'all fit', verdicts: [fit, fit, fit], total: 3, expected: '3/3 workers fit' },
    { name: 'no workers', verdicts: [], total: 0, expected: '0/0 workers fit' },
    // equal counts sort by text: "label..." < "worker..."
    {
      name: 'count desc, then text',
      verdicts: [
        unfit('worker draining'),
        unfit('region ord≠lis'),
        unfit('label gpu missing'),
        unfit('worker draining'),
        unfit('label gpu missing'),
        fit,
      ],
      total: 6,
      expected: '1/6 workers fit: 2 label gpu missing, 2 worker draining, 1 region ord≠lis',
    },
    // all free values equal: exact, not "≤"
    {
      name: 'shortages agreeing on free',
      verdicts: [unfit('insufficient cpu (need 2000, free 500)'), unfit('insufficient cpu (need 2000, free 500)')],
      total: 2,
      expected: '0/2 workers fit: 2 insufficient cpu (need 2000, free 500)',
    },
    // a different need is a different group; the group of 2 shows max(100, 300) = 300
    {
      name: 'shortages group by resource and need',
      verdicts: [
        unfit('insufficient memory (need 1024, free 100)'),
        unfit('insufficient memory (need 2048, free 900)'),
        unfit('insufficient memory (need 1024, free 300)'),
      ],
      total: 3,
      expected:
        '0/3 workers fit: 2 insufficient memory (need 1024, free ≤ 300), 1 insufficient memory (need 2048, free 900)',
    },
    // an empty reason is named after its filter
    {
      name: 'empty reason',
      verdicts: [unfit('', 'my-filter')],
      total: 1,
      expected: '0/1 workers fit: 1 my-filter failed',
    },
    // more workers than verdicts (e.g. some excluded before placement)
    {
      name: 'total beyond verdicts',
      verdicts: [unfit('no free slot')],
      total: 5,
      expected: '0/5 workers fit: 1 no free slot',
    },
  ])('$name', ({ verdicts, total, expected }) => {
    expect(summarizeUnfit(verdicts, total)).toBe(expected);
  });
});

describe('neverFitsReason (enqueue 422)', () => {
  const workers = [
    makeWorker({ id: 'busy', state: 'draining', allocated: capacity({ cpu: 4000, memoryMb: 8192, slots: 4 }) }),
    makeWorker({ id: 'far', region: 'ord', capacity: capacity({ cpu: 64000, memoryMb: 65536, slots: 8 }) }),
  ];
  test.each([
    // busy and draining now, but 4096 <= capacity 8192 when idle
    {
      name: 'fits some worker when idle',
      constraints: { region: 'mad', resources: { memoryMb: 4096 } },
      expected: null,
    },
    // mad: capacity 8192 < 16384; ord: wrong region
    {
      name: 'fits no worker ever',
      constraints: { region: 'mad', resources: { memoryMb: 16_384 } },
      expected: '0/2 workers fit: 1 insufficient memory (need 16384, free 8192), 1 region ord≠mad',
    },
  ])('$name', ({ constraints, expected }) => {
    expect(neverFitsReason(makeJob({ constraints }), workers, ctx)).toBe(expected);
  });

  test('no known workers: never fits', () => {
    expect(neverFitsReason(makeJob(), [], ctx)).toBe('0/0 workers fit');
  });
});

describe('rankJobsForWorker (pull mode)', () => {
  // free: memory 8192 - 2048 = 6144, slots 3
  const worker = makeWorker({
    capacity: capacity({ cpu: 4000, memoryMb: 8192, slots: 3 }),
    allocated: capacity({ memoryMb: 2048 }),
  });
  const mem = (id: number, priority: number, createdAt: number, memoryMb: number, region = 'mad') =>
    makeJob({ id, priority, createdAt, constraints: { region, resources: { memoryMb } } });
  const jobs = [
    mem(1, 0, 100, 4096),
    mem(2, 5, 300, 4096),
    mem(3, 5, 200, 1024),
    mem(4, 9, 0, 512, 'ord'), // wrong region
    mem(5, 0, 50, 8192), // 8192 > 6144 free
    mem(6, 0, 400, 512),
  ];

  test.each([
    // eligible by priority then age: 3 (p5,t200), 2 (p5,t300), 1 (p0,t100), 6 (p0,t400)
    // take 3: memory 6144-1024 = 5120, slots 2; take 2: 5120-4096 = 1024, slots 1;
    // skip 1: 4096 > 1024; take 6: 1024-512 = 512, slots 0
    { name: 'greedy claim fits cumulatively', max: undefined, claim: [3, 2, 6] },
    { name: 'max 2', max: 2, claim: [3, 2] },
    { name: 'max 1', max: 1, claim: [3] },
    { name: 'max 0', max: 0, claim: [] },
  ])('$name', ({ max, claim }) => {
    const result = rankJobsForWorker(jobs, worker, { filters: defaultFilters, ctx, max });
    expect(result.eligible.map((j) => j.id)).toEqual([3, 2, 1, 6]);
    expect(result.claim.map((j) => j.id)).toEqual(claim);
  });

  test('slots bound the claim: free slots 1 -> one job', () => {
    const oneSlot = { ...worker, allocated: capacity({ memoryMb: 2048, slots: 2 }) };
    expect(rankJobsForWorker(jobs, oneSlot, { filters: defaultFilters, ctx }).claim.map((j) => j.id)).toEqual([3]);
  });

  test('a draining worker gets nothing', () => {
    const result = rankJobsForWorker(jobs, { ...worker, state: 'draining' }, { filters: defaultFilters, ctx });
    expect(result).toEqual({ eligible: [], claim: [] });
  });
});
