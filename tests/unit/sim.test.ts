// The simulator: deterministic for a seed, and the placement invariants hold in both modes.
import { simulate } from '../../sim/simulate.js';
import { workloadSchema } from '../../sim/workload.js';

const workload = workloadSchema.parse({
  seed: 3,
  arrivalSeconds: 120,
  workers: [
    { count: 3, region: 'ord', capacity: { cpu: 2000, memoryMb: 2048, slots: 4 } },
    { count: 2, region: 'mad', capacity: { cpu: 2000, memoryMb: 2048, slots: 2 } },
  ],
  jobs: [
    {
      name: 'mad-only',
      ratePerSecond: 0.5,
      meanRunSeconds: 5,
      constraints: { region: 'mad', resources: { cpu: 1000 } },
    },
    { name: 'anywhere', ratePerSecond: 1, meanRunSeconds: 3, constraints: { resources: { cpu: 500, memoryMb: 512 } } },
    { name: 'too-big', ratePerSecond: 0.05, meanRunSeconds: 1, constraints: { resources: { memoryMb: 4096 } } },
  ],
});

test.each(['pull', 'central'] as const)(
  '%s: every job runs within its constraints and capacity, or is refused with reasons',
  (mode) => {
    const r = simulate(workload, mode);
    expect(r.violations).toEqual({ constraint: 0, capacity: 0 });
    expect(r.completed + r.unplaceable.count + r.stillWaiting).toBe(r.jobs);
    expect(r.stillWaiting).toBe(0);
    expect(r.unplaceable.count).toBeGreaterThan(0);
    expect(r.unplaceable.reasons).toEqual({
      'too-big': '0/5 workers fit: 5 insufficient memory (need 4096, free 2048)',
    });
    expect(r.cpuUtilization).toBeGreaterThan(0);
  },
);

test('the same seed gives the same result; another seed, another workload', () => {
  expect(simulate(workload, 'central')).toEqual(simulate(workload, 'central'));
  expect(simulate(workload, 'pull')).toEqual(simulate(workload, 'pull'));
  expect(simulate({ ...workload, seed: 4 }, 'pull').jobs).not.toBe(simulate(workload, 'pull').jobs);
});

test('central mode waits for its scheduler tick; pull answers at long-poll speed', () => {
  const pull = simulate(workload, 'pull');
  const central = simulate(workload, 'central');
  // An idle cluster: pull starts a job after the wake delay (5 ms); central at the next 250 ms tick plus 5 ms.
  expect(pull.waitSeconds.p50).toBeCloseTo(0.005, 3);
  expect(central.waitSeconds.p50).toBeGreaterThan(0.005);
  expect(central.waitSeconds.p50).toBeLessThanOrEqual(0.255);
});
