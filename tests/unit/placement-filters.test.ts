import { capacity, makeJob, makeWorker } from '../../placement/fixtures.js';
import {
  defaultFilters,
  firstFailure,
  fitsWhenIdle,
  labelsFilter,
  regionFilter,
  resourcesFilter,
  workerActiveFilter,
  type JobConstraints,
  type PlacementWorker,
} from '../../placement/index.js';

const ctx = { now: 0 };

describe('region filter', () => {
  test.each<{ name: string; want?: string | string[]; region: string | null; expected: string | null }>([
    { name: 'no constraint', region: 'ord', expected: null },
    { name: 'exact match', want: 'mad', region: 'mad', expected: null },
    { name: 'exact mismatch', want: 'mad', region: 'ord', expected: 'region ord≠mad' },
    { name: 'member of the set', want: ['mad', 'lis'], region: 'lis', expected: null },
    { name: 'not in the set', want: ['mad', 'lis'], region: 'ord', expected: 'region ord∉{mad,lis}' },
    { name: 'worker without region, exact', want: 'mad', region: null, expected: 'no region (wants mad)' },
    { name: 'worker without region, set', want: ['mad'], region: null, expected: 'no region (wants one of mad)' },
    { name: 'worker without region, no constraint', region: null, expected: null },
  ])('$name', ({ want, region, expected }) => {
    const job = makeJob({ constraints: want === undefined ? {} : { region: want } });
    expect(regionFilter.check(job, makeWorker({ region }), ctx)).toBe(expected);
  });
});

describe('resources filter (free = capacity - allocated; worker capacity cpu 4000, memory 8192, disk 100000, slots 4)', () => {
  test.each<{
    name: string;
    request: JobConstraints['resources'];
    allocated: Parameters<typeof capacity>[0];
    expected: string | null;
  }>([
    // nothing asked, one slot of 4 free
    { name: 'no request on an idle worker', request: undefined, allocated: {}, expected: null },
    // cpu free 4000 - 1500 = 2500 >= 2000
    { name: 'cpu fits in what is free', request: { cpu: 2000 }, allocated: { cpu: 1500 }, expected: null },
    // cpu free 4000 - 1500 = 2500 < 3000
    {
      name: 'cpu short',
      request: { cpu: 3000 },
      allocated: { cpu: 1500 },
      expected: 'insufficient cpu (need 3000, free 2500)',
    },
    // memory free 8192 - 7680 = 512 < 1024
    {
      name: 'memory short',
      request: { memoryMb: 1024 },
      allocated: { memoryMb: 7680 },
      expected: 'insufficient memory (need 1024, free 512)',
    },
    // disk free 100000 < 200000
    {
      name: 'disk short',
      request: { diskMb: 200_000 },
      allocated: {},
      expected: 'insufficient disk (need 200000, free 100000)',
    },
    // need == free is a fit
    { name: 'exact fit', request: { memoryMb: 8192 }, allocated: {}, expected: null },
    // slots free 4 - 4 = 0 < 1
    { name: 'no slot left', request: undefined, allocated: { slots: 4 }, expected: 'no free slot' },
    // slots are checked first, as Kubernetes checks the pod count first
    {
      name: 'no slot and memory short',
      request: { memoryMb: 9000 },
      allocated: { slots: 4 },
      expected: 'no free slot',
    },
    // cpu 5000 > 4000 and memory 9000 > 8192: the first resource in order (cpu) is reported
    {
      name: 'cpu and memory short',
      request: { cpu: 5000, memoryMb: 9000 },
      allocated: {},
      expected: 'insufficient cpu (need 5000, free 4000)',
    },
    // overcommitted: free cpu 4000 - 5000 < 0, but the job asks for no cpu, so cpu is not checked
    {
      name: 'unrequested resource is not checked',
      request: { memoryMb: 10 },
      allocated: { cpu: 5000 },
      expected: null,
    },
    // free cpu -1000 is shown as 0
    {
      name: 'overcommitted shows free 0',
      request: { cpu: 1 },
      allocated: { cpu: 5000 },
      expected: 'insufficient cpu (need 1, free 0)',
    },
  ])('$name', ({ request, allocated, expected }) => {
    const job = makeJob({ constraints: request ? { resources: request } : {} });
    expect(resourcesFilter.check(job, makeWorker({ allocated: capacity(allocated) }), ctx)).toBe(expected);
  });
});

describe('labels filter', () => {
  test.each<{
    name: string;
    selector?: Record<string, string | string[]>;
    labels: Record<string, string>;
    expected: string | null;
  }>([
    { name: 'no selector', labels: {}, expected: null },
    { name: 'equal', selector: { gpu: 'a100' }, labels: { gpu: 'a100' }, expected: null },
    { name: 'different value', selector: { gpu: 'a100' }, labels: { gpu: 'none' }, expected: 'label gpu=none≠a100' },
    { name: 'missing label', selector: { gpu: 'a100' }, labels: {}, expected: 'label gpu missing' },
    { name: 'member of the set', selector: { gpu: ['a100', 'h100'] }, labels: { gpu: 'h100' }, expected: null },
    {
      name: 'not in the set',
      selector: { gpu: ['a100', 'h100'] },
      labels: { gpu: 't4' },
      expected: 'label gpu=t4∉{a100,h100}',
    },
    {
      name: 'all keys must match',
      selector: { zone: 'a', gpu: 'a100' },
      labels: { zone: 'a' },
      expected: 'label gpu missing',
    },
    // Object.prototype.constructor must not count as a label
    {
      name: 'prototype names are not labels',
      selector: { constructor: 'x' },
      labels: {},
      expected: 'label constructor missing',
    },
  ])('$name', ({ selector, labels, expected }) => {
    const job = makeJob({ constraints: selector ? { labels: selector } : {} });
    expect(labelsFilter.check(job, makeWorker({ labels }), ctx)).toBe(expected);
  });
});

describe('worker-active filter', () => {
  test.each<{ state: PlacementWorker['state']; expected: string | null }>([
    { state: 'active', expected: null },
    { state: 'draining', expected: 'worker draining' },
    { state: 'gone', expected: 'worker gone' },
  ])('$state', ({ state, expected }) => {
    expect(workerActiveFilter.check(makeJob(), makeWorker({ state }), ctx)).toBe(expected);
  });
});

describe('firstFailure', () => {
  test('records the first failing filter in the default order (worker-active, region, labels, resources)', () => {
    const job = makeJob({ constraints: { region: 'ord', labels: { gpu: 'a100' }, resources: { memoryMb: 99_999 } } });
    const worker = makeWorker({ state: 'draining', region: 'mad' });
    expect(firstFailure(job, worker, defaultFilters, ctx)).toEqual({
      filter: 'worker-active',
      reason: 'worker draining',
    });
    expect(firstFailure(job, makeWorker({ region: 'mad' }), defaultFilters, ctx)).toEqual({
      filter: 'region',
      reason: 'region mad≠ord',
    });
  });

  test('an empty reason still rejects; undefined from a JavaScript plugin accepts', () => {
    const empty = { name: 'empty', check: () => '' };
    const lax = { name: 'lax', check: () => undefined as unknown as null };
    expect(firstFailure(makeJob(), makeWorker(), [lax, empty], ctx)).toEqual({ filter: 'empty', reason: '' });
  });
});

describe('fitsWhenIdle (capacity instead of free; worker state ignored)', () => {
  const busy = capacity({ cpu: 4000, memoryMb: 8192, slots: 4 });
  test.each<{ name: string; constraints: JobConstraints; worker: Partial<PlacementWorker>; expected: string | null }>([
    // free memory is 0, but capacity 8192 >= 1024
    {
      name: 'full now, fits when idle',
      constraints: { resources: { memoryMb: 1024 } },
      worker: { allocated: busy },
      expected: null,
    },
    // capacity 8192 < 16384
    {
      name: 'bigger than the worker',
      constraints: { resources: { memoryMb: 16_384 } },
      worker: {},
      expected: 'insufficient memory (need 16384, free 8192)',
    },
    { name: 'draining now, fits later', constraints: {}, worker: { state: 'draining' }, expected: null },
    {
      name: 'wrong region never fits',
      constraints: { region: 'mad' },
      worker: { region: 'ord', allocated: busy },
      expected: 'region ord≠mad',
    },
    {
      name: 'label never matches',
      constraints: { labels: { gpu: 'a100' } },
      worker: {},
      expected: 'label gpu missing',
    },
    // a worker with no slots at all can never take a job
    {
      name: 'no slots at all',
      constraints: {},
      worker: { capacity: capacity({ cpu: 4000, memoryMb: 8192 }) },
      expected: 'no free slot',
    },
  ])('$name', ({ constraints, worker, expected }) => {
    expect(fitsWhenIdle(makeJob({ constraints }), makeWorker(worker), ctx)).toBe(expected);
  });
});
