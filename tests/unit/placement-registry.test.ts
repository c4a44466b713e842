import * as heartbeatPlugin from '../../placement/examples/heartbeat-freshness.js';
import { freshHeartbeat, recentHeartbeat } from '../../placement/examples/heartbeat-freshness.js';
import { capacity, makeJob, makeWorker } from '../../placement/fixtures.js';
import {
  builtinRegistry,
  buildPlacementConfig,
  DEFAULT_PLACEMENT_SPEC,
  place,
  registerPlugins,
  type PlacementSpec,
  type Ranker,
} from '../../placement/index.js';

const ctx = { now: 1_000_000 };
const names = (spec?: PlacementSpec) => {
  const config = buildPlacementConfig(spec);
  return { filters: config.filters.map((f) => f.name), rankers: config.rankers.map((r) => [r.name, r.weight]) };
};

describe('buildPlacementConfig', () => {
  test('defaults: all four filters; least-allocated ×1 and affinity ×2', () => {
    expect(names()).toEqual({
      filters: ['worker-active', 'region', 'labels', 'resources'],
      rankers: [
        ['least-allocated', 1],
        ['affinity', 2],
      ],
    });
    expect(names({})).toEqual(names(DEFAULT_PLACEMENT_SPEC));
  });

  test('rankers replace the defaults; filters may be reordered', () => {
    expect(
      names({
        filters: ['resources', 'labels', 'region', 'worker-active'],
        rankers: [{ name: 'binpack', weight: 3 }, { name: 'spread' }],
      }),
    ).toEqual({
      filters: ['resources', 'labels', 'region', 'worker-active'],
      rankers: [
        ['binpack', 3],
        ['spread', 1],
      ],
    });
    expect(names({ rankers: [] }).rankers).toEqual([]);
  });

  test('params reach the factory', () => {
    const [ranker] = buildPlacementConfig({
      rankers: [{ name: 'most-allocated', params: { resourceWeights: { cpu: 2, memoryMb: 1 } } }],
    }).rankers;
    const job = makeJob({ constraints: { resources: { cpu: 3000, memoryMb: 5000 } } });
    const worker = makeWorker({ capacity: capacity({ cpu: 4000, memoryMb: 10000, slots: 1 }) });
    // cpu 3000*100/4000 = 75; memory 5000*100/10000 = 50; (75*2 + 50*1)/3 = 200/3 = 66
    expect(ranker!.score(job, worker, ctx)).toBe(66);
  });

  test.each<{ name: string; spec: PlacementSpec; error: string }>([
    {
      name: 'unknown ranker',
      spec: { rankers: [{ name: 'random' }] },
      error: 'unknown ranker "random" (known: least-allocated, most-allocated, binpack, spread, affinity)',
    },
    {
      name: 'unknown filter',
      spec: { filters: ['worker-active', 'region', 'labels', 'resources', 'gpu'] },
      error: 'unknown filter "gpu" (known: worker-active, region, labels, resources)',
    },
    {
      name: 'built-in filter dropped',
      spec: { filters: ['worker-active', 'labels', 'resources'] },
      error: "filters must include the built-in region: they enforce the job's constraints",
    },
    {
      name: 'filter twice',
      spec: { filters: ['worker-active', 'region', 'region', 'labels', 'resources'] },
      error: 'filter "region" is listed twice',
    },
    {
      name: 'ranker twice',
      spec: { rankers: [{ name: 'affinity' }, { name: 'affinity', weight: 2 }] },
      error: 'ranker "affinity" is listed twice',
    },
    {
      name: 'bad weight',
      spec: { rankers: [{ name: 'spread', weight: -2 }] },
      error: 'ranker spread: weight must be a finite number ≥ 0, got -2',
    },
    {
      name: 'unknown param',
      spec: { rankers: [{ name: 'affinity', params: { labels: {} } }] },
      error: 'ranker affinity: unknown option labels (accepted: none besides weight)',
    },
    { name: 'prototype name', spec: { rankers: [{ name: 'toString' }] }, error: 'unknown ranker "toString"' },
  ])('rejects: $name', ({ spec, error }) => {
    expect(() => buildPlacementConfig(spec)).toThrow(error);
  });
});

describe('registerPlugins', () => {
  test('the example plugin joins a new registry and places by heartbeat', () => {
    const registry = registerPlugins(heartbeatPlugin);
    expect(Object.keys(builtinRegistry.filters)).not.toContain('recent-heartbeat'); // the built-ins are untouched
    const config = buildPlacementConfig(
      {
        filters: [...DEFAULT_PLACEMENT_SPEC.filters, 'recent-heartbeat'],
        rankers: [{ name: 'fresh-heartbeat', weight: 2, params: { staleAfterMs: 20_000 } }],
      },
      registry,
    );
    const workers = [
      makeWorker({ id: 'w10s', lastSeenAt: ctx.now - 10_000 }),
      makeWorker({ id: 'w5s', lastSeenAt: ctx.now - 5_000 }),
      makeWorker({ id: 'w90s', lastSeenAt: ctx.now - 90_000 }),
    ];
    const result = place(makeJob(), workers, { ...config, ctx });
    // 100 * (1 - 10000/20000) = 50; 100 * (1 - 5000/20000) = 75; 90 s > 60 s is filtered
    expect(result.verdicts.map((v) => [v.workerId, v.total ?? v.reason])).toEqual([
      ['w10s', 50],
      ['w5s', 75],
      ['w90s', 'no heartbeat for 60s'],
    ]);
    expect(result.chosen?.id).toBe('w5s');
    expect(config.rankers[0]!.weight).toBe(2);
  });

  test('a plain Ranker takes a weight from the spec but no params; a default export is accepted', () => {
    const even: Ranker = { name: 'even', weight: 1, score: (_j, w) => (w.id.endsWith('2') ? 100 : 0) };
    const registry = registerPlugins({ default: { rankers: [even] } });
    const [ranker] = buildPlacementConfig({ rankers: [{ name: 'even', weight: 4 }] }, registry).rankers;
    expect([ranker!.name, ranker!.weight, ranker!.score(makeJob(), makeWorker({ id: 'w2' }), ctx)]).toEqual([
      'even',
      4,
      100,
    ]);
    expect(() => buildPlacementConfig({ rankers: [{ name: 'even', params: { x: 1 } }] }, registry)).toThrow(
      'ranker even: unknown option x',
    );
  });

  test.each<{ name: string; module: unknown; error: string }>([
    {
      name: 'not a module',
      module: null,
      error: 'plugin: expected a module exporting filters and/or rankers, got null',
    },
    { name: 'nothing exported', module: { helper: 1 }, error: 'plugin: exports no filters and no rankers' },
    {
      name: 'filters not an array',
      module: { filters: 'region' },
      error: 'plugin: "filters" must be an array, got string',
    },
    {
      name: 'filter without check',
      module: { filters: [{ name: 'x' }] },
      error: 'plugin filters[0]: expected {name, check()}, got an object with keys name',
    },
    {
      name: 'filter without name',
      module: { filters: [{ name: '', check: () => null }] },
      error: 'plugin filters[0]: expected {name, check()}',
    },
    {
      name: 'ranker of the wrong kind',
      module: { rankers: [42] },
      error: 'plugin rankers[0]: expected a Ranker {name, weight, score()} or a factory function, got number',
    },
    {
      name: 'factory returning junk',
      module: { rankers: [() => ({ name: 'x' })] },
      error: 'plugin rankers[0]: factory({}) must return {name, weight, score()}, got an object with keys name',
    },
    {
      name: 'name taken by a built-in',
      module: { filters: [{ name: 'region', check: () => null }] },
      error: 'plugin: filter "region" is already registered',
    },
    {
      name: 'name taken twice',
      module: { rankers: [freshHeartbeat, freshHeartbeat] },
      error: 'plugin: ranker "fresh-heartbeat" is already registered',
    },
  ])('rejects: $name', ({ module, error }) => {
    expect(() => registerPlugins(module)).toThrow(error);
  });
});

describe('example plugin: heartbeat freshness', () => {
  test.each([
    // 100 * max(0, 1 - silence / 30000)
    { silence: 0, score: 100, filtered: null },
    { silence: 15_000, score: 50, filtered: null }, // 1 - 15000/30000 = 0.5
    { silence: 45_000, score: 0, filtered: null }, // 1 - 1.5 < 0 -> 0
    { silence: 60_000, score: 0, filtered: null }, // exactly a minute is still recent
    { silence: 60_001, score: 0, filtered: 'no heartbeat for 60s' },
  ])('silent $silence ms: score $score, filter $filtered', ({ silence, score, filtered }) => {
    const worker = makeWorker({ lastSeenAt: ctx.now - silence });
    expect(freshHeartbeat().score(makeJob(), worker, ctx)).toBe(score);
    expect(recentHeartbeat.check(makeJob(), worker, ctx)).toBe(filtered);
  });

  test('rejects a non-positive staleAfterMs', () => {
    expect(() => freshHeartbeat({ staleAfterMs: 0 })).toThrow(
      'ranker fresh-heartbeat: staleAfterMs must be > 0, got 0',
    );
  });
});
