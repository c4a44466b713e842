// The simulator against queueing theory: the mm-c preset under pull with zero claim and wake-up
// costs is an M/M/c FCFS queue, whose mean wait Erlang C gives exactly.
import { preset } from '../../sim/presets.js';
import { simulate } from '../../sim/simulate.js';

/** Erlang C: the chance an arrival waits, for c servers and offered load a = λ/μ (< c). */
function erlangC(c: number, a: number): number {
  let term = 1;
  let sum = 1;
  for (let k = 1; k < c; k++) sum += term *= a / k;
  const top = ((term * a) / c) * (c / (c - a));
  return top / (sum + top);
}

const meanWait = (c: number, lambda: number, s: number) => (erlangC(c, lambda * s) * s) / (c - lambda * s);

test('Erlang C itself: the textbook value for c = 2, a = 1 (1/3)', () => {
  expect(erlangC(2, 1)).toBeCloseTo(1 / 3, 12);
  expect(meanWait(1, 0.5, 1)).toBeCloseTo(1, 12); // M/M/1: ρ/(μ - λ)
});

// Run length. The estimate's noise is set by the queue's relaxation time, about
// 1 / (cμ(1 - √ρ)²): 38 s for c = 10, μ = 1 at ρ = 0.9, 5 s at 0.8, under 1 s at 0.5. Measured over
// seeds, one 200,000-job run at ρ = 0.9 has a relative sd of about 8% in its mean wait; that
// shrinks as 1/√jobs, so three seeds of 700,000 (2.1M jobs, ~55,000 relaxation times) put one
// standard error near 2.5% and the 5% tolerance at 2 of them. At 0.8 the relaxation is far shorter.
// At 0.5 only 4% of jobs wait at all, so the mean is noisier per job and needs 900,000 of them.
// Starting empty biases the mean by about τ/T < 0.1%. All of it runs in under 20 s.
test.each([
  [0.5, 300_000, [1, 2, 3]],
  [0.8, 400_000, [1, 2]],
  [0.9, 700_000, [1, 2, 3]],
])('mm-c under pull at utilization %d: mean wait within 5%% of Erlang C', (rho, jobs, seeds) => {
  const c = 10;
  const s = 1;
  const lambda = (rho * c) / s;
  const waits = seeds.map(
    (seed) =>
      simulate(preset('mm-c', { workers: c, rate: lambda, meanService: s, jobs, seed }), 'pull').meanWaitSeconds,
  );
  const mean = waits.reduce((a, b) => a + b, 0) / waits.length;
  const theory = meanWait(c, lambda, s);
  expect(Math.abs(mean / theory - 1)).toBeLessThan(0.05);
});
