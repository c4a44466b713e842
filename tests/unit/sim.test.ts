// The simulator: deterministic for a seed, the invariants hold in every model, and the auction
// scores as Diego's design says. The M/M/c check against Erlang C is in sim-erlang.test.ts.
import { auctionScore } from '../../sim/models/auction.js';
import { preset } from '../../sim/presets.js';
import { MODELS, simulate } from '../../sim/simulate.js';
import { workloadSchema } from '../../sim/workload.js';

const regions = preset('regions', { jobs: 5000 });

test.each(MODELS)('%s on regions: zero violations, every job accounted for, refusals with reasons', (model) => {
  const r = simulate(regions, model);
  expect(r.violations).toEqual({ constraint: 0, capacity: 0 });
  expect(r.completed + r.unplaceable.count + r.stillWaiting).toBe(r.jobs);
  expect(r.lost).toBeGreaterThan(0); // the mad-fail group failed mid-run and its runs came back
  expect(r.unplaceable.byClass['lis-report']?.reason).toMatch(/^0\/\d+ workers fit: .*region ord≠lis/);
});

test('the same seed gives the same JSON; another seed another run', () => {
  for (const model of MODELS) {
    expect(JSON.stringify(simulate(regions, model))).toBe(JSON.stringify(simulate(regions, model)));
  }
  const other = preset('regions', { jobs: 5000, seed: 8 });
  expect(simulate(other, 'pull').meanWaitSeconds).not.toBe(simulate(regions, 'pull').meanWaitSeconds);
});

test('the old regions example still loads and runs', () => {
  const w = workloadSchema.parse({
    seed: 3,
    arrivalSeconds: 60,
    workers: [{ count: 2, region: 'mad', capacity: { cpu: 2000, memoryMb: 2048, slots: 2 } }],
    jobs: [{ name: 'a', ratePerSecond: 1, meanRunSeconds: 1, constraints: { region: 'mad' } }],
  });
  expect(simulate(w, 'central').completed).toBeGreaterThan(30);
});

// Diego's bid, worked by hand: mean over the resources the cell has of (in use + job) / capacity,
// plus the penalty per instance of the same class already on the cell. Lower wins.
const cell = { cpu: 4000, memoryMb: 8000, diskMb: 0, slots: 4 };
const job = { cpu: 1000, memoryMb: 2000, diskMb: 0, slots: 1 };
test.each([
  // allocated, same-class instances, score
  [{ cpu: 0, memoryMb: 0, diskMb: 0, slots: 0 }, 0, (0.25 + 0.25 + 0.25) / 3],
  [{ cpu: 2000, memoryMb: 2000, diskMb: 0, slots: 1 }, 0, (0.75 + 0.5 + 0.5) / 3],
  [{ cpu: 1000, memoryMb: 6000, diskMb: 0, slots: 2 }, 1, (0.5 + 1 + 0.75) / 3 + 10],
  [{ cpu: 0, memoryMb: 0, diskMb: 0, slots: 0 }, 2, 0.25 + 20],
])('auction score with %j in use and %d of the class: %d', (allocated, same, score) => {
  expect(auctionScore(job, cell, allocated, same, 10)).toBeCloseTo(score, 12);
});

test('the auction spreads a class before it packs: an idle cell running the class loses to a busy one', () => {
  const busyNoClass = auctionScore(job, cell, { cpu: 2000, memoryMb: 4000, diskMb: 0, slots: 2 }, 0, 1000);
  const idleWithClass = auctionScore(job, cell, { cpu: 0, memoryMb: 0, diskMb: 0, slots: 0 }, 1, 1000);
  expect(busyNoClass).toBeLessThan(idleWithClass);
});

// As in the server's scheduler: a head of jobs that fit nowhere now (a busy one-slot gpu worker,
// hundreds of gpu jobs ahead in priority) must not hold back the cpu jobs behind them.
test('central: jobs that fit nowhere now do not hold back the ones behind them', () => {
  const w = workloadSchema.parse({
    seed: 4,
    arrivalSeconds: 300,
    drainSeconds: 0,
    workers: [
      { count: 1, labels: { gpu: 'yes' }, capacity: { slots: 1 } },
      { count: 4, capacity: { slots: 4 } },
    ],
    jobs: [
      {
        name: 'gpu',
        ratePerSecond: 5,
        runTime: { kind: 'fixed', seconds: 100 },
        priority: 10,
        constraints: { labels: { gpu: 'yes' } },
      },
      { name: 'cpu', ratePerSecond: 1, meanRunSeconds: 1 },
    ],
    costs: { batchSize: 50 },
  });
  const r = simulate(w, 'central');
  expect(r.stillWaiting).toBeGreaterThan(1000); // the gpu backlog
  expect(r.waitByClass.cpu!.count).toBeGreaterThan(250);
  // A tick (0.25 s) plus the wake-up and claim, never the gpu backlog's hours.
  expect(r.waitByClass.cpu!.max).toBeLessThan(0.3);
});
