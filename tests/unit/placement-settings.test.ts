// Server placement settings: modes per queue, plugin modules loaded by path, clear errors.
import { loadPlacementSettings } from '../../server/placement/settings.js';

const names = (xs: readonly { name: string }[]) => xs.map((x) => x.name);

test('defaults: pull mode, the queue filter first, then the four built-in filters', async () => {
  const s = await loadPlacementSettings({});
  expect(s.defaultMode).toBe('pull');
  expect(names(s.configFor('any').filters)).toEqual(['queue', 'worker-active', 'region', 'labels', 'resources']);
  expect(s.configFor('any').rankers.map((r) => [r.name, r.weight])).toEqual([
    ['least-allocated', 1],
    ['affinity', 2],
  ]);
});

test('a queue may override the mode and the rankers', async () => {
  const s = await loadPlacementSettings({
    queues: { batch: { mode: 'central', rankers: [{ name: 'most-allocated', weight: 3 }] } },
  });
  expect(s.modeFor('batch')).toBe('central');
  expect(s.modeFor('default')).toBe('pull');
  expect(s.overriddenQueues).toEqual(['batch']);
  expect(s.configFor('batch').rankers.map((r) => [r.name, r.weight])).toEqual([['most-allocated', 3]]);
  const central = await loadPlacementSettings({ queues: { batch: { mode: 'central' } } }, 'central');
  expect(central.overriddenQueues).toEqual([]);
});

test("a user's plugin module is loaded by path and its plugins are named in the spec", async () => {
  const s = await loadPlacementSettings({
    plugins: ['placement/examples/heartbeat-freshness.ts'],
    filters: ['worker-active', 'region', 'labels', 'resources', 'recent-heartbeat'],
    rankers: [{ name: 'fresh-heartbeat', weight: 2, params: { staleAfterMs: 10_000 } }],
  });
  const config = s.configFor('default');
  expect(names(config.filters)).toContain('recent-heartbeat');
  const stale = {
    id: 'w',
    name: 'w',
    region: null,
    labels: {},
    state: 'active' as const,
    capacity: { cpu: 1, memoryMb: 1, diskMb: 1, slots: 1 },
    allocated: { cpu: 0, memoryMb: 0, diskMb: 0, slots: 0 },
    lastSeenAt: 0,
  };
  const job = { id: 1, queue: 'default', priority: 0, createdAt: 0, constraints: {}, preferences: [] };
  // 90 s of silence: the example filter rejects workers silent for over 60 s.
  expect(config.filters.find((f) => f.name === 'recent-heartbeat')!.check(job, stale, { now: 90_000 })).toBe(
    'no heartbeat for 60s',
  );
  // 5 s of silence with staleAfterMs 10 s: 100 * (1 - 5000/10000) = 50.
  expect(config.rankers[0].score(job, stale, { now: 5_000 })).toBe(50);
});

test('bad settings fail at start with the field named', async () => {
  await expect(loadPlacementSettings({ mode: 'auction' })).rejects.toThrow(/placement\.mode/);
  await expect(loadPlacementSettings({ rankers: [{ name: 'nope' }] })).rejects.toThrow(/unknown ranker "nope"/);
  await expect(loadPlacementSettings({ filters: ['region'] })).rejects.toThrow(/must include the built-in/);
});
