// The report's charts from the models' results: the wait CDF, utilization and the distribution score over time.
import type { SeriesPoint } from '../metrics.js';
import type { SimResult } from '../simulate.js';
import { lineChart, type Series } from './svg.js';

/** One colour per model, the same in every chart; distinct for common colour blindness. */
const COLORS: Record<string, string> = { pull: '#0072b2', central: '#d55e00', auction: '#009e73', p2c: '#cc79a7' };
const EXTRA = ['#e69f00', '#56b4e9', '#000000'];
export const colorOf = (model: string, i: number) => COLORS[model] ?? EXTRA[i % EXTRA.length]!;
const DASHES = ['', '7 3', '2 2', '9 3 2 3'];
const style = (model: string, i: number) => ({
  name: model,
  color: colorOf(model, i),
  dash: DASHES[i % DASHES.length],
});

export interface Chart {
  title: string;
  note: string;
  svg: string;
}

/** Waits below 1 ms are drawn at 1 ms: on a log axis the many zero waits must show somewhere. */
const WAIT_FLOOR = 1e-3;
const seconds = (v: number) => (v < 1 ? `${Number((v * 1000).toPrecision(3))} ms` : `${v.toLocaleString('en')} s`);
const percent = (v: number) => `${Math.round(v * 100)}%`;

export function charts(results: readonly SimResult[]): Chart[] {
  const over = (f: (p: SeriesPoint) => number): Series[] =>
    results.map((r, i) => ({ ...style(r.model, i), points: r.series.map((p) => [p.t, f(p)]) }));
  const time = { label: 'simulated time (s)', min: 0 };
  const share = (label: string) => ({ label, min: 0, max: 1, format: percent });
  const utilization = (key: 'cpu' | 'memoryMb' | 'slots', name: string): Chart => ({
    title: `${name} in use over time`,
    note: `The share of all live workers' ${name} held by running jobs, sampled through the run.`,
    svg: lineChart({
      id: `utilization-${key}`,
      description: `${name} utilization over time, one line per model`,
      x: time,
      y: share(`share of ${name} in use`),
      series: over((p) => p[key]),
    }),
  });
  return [
    {
      title: 'Queue wait, cumulative',
      note: 'The share of jobs that waited at most x from arrival (or requeue) to start. Further left is better; the right end is the longest wait. Waits under 1 ms are drawn at 1 ms.',
      svg: lineChart({
        id: 'wait-cdf',
        description: 'cumulative distribution of queue wait, one line per model',
        x: { label: 'queue wait (log scale)', log: true, min: WAIT_FLOOR, format: seconds },
        y: { label: 'share of jobs', min: 0, max: 1, format: percent },
        series: results.map((r, i) => ({ ...style(r.model, i), points: r.waitCdf })),
        step: true,
      }),
    },
    {
      title: 'Distribution score over time',
      note: "Diego's score: the standard deviation over the mean of memory in use per worker. Lower is more even. It rises at the end, as the last jobs drain.",
      svg: lineChart({
        id: 'distribution-score',
        description: 'distribution score over time, one line per model',
        x: time,
        y: { label: 'sd / mean of memory in use', min: 0 },
        series: over((p) => p.distribution),
      }),
    },
    utilization('cpu', 'CPU'),
    utilization('memoryMb', 'memory'),
    utilization('slots', 'slots'),
    {
      title: 'Stranded capacity over time',
      note: 'The share of all slots free on workers no waiting job fits; lower is better. Each point is the mean of the 9 samples around it.',
      svg: lineChart({
        id: 'stranded',
        description: 'stranded capacity over time, one line per model',
        x: time,
        y: share('share of all slots'),
        series: smooth(
          over((p) => p.stranded),
          4,
        ),
      }),
    },
  ];
}

/** A centred moving mean over 2k + 1 points: an instantaneous share that flips between 0 and 40% is unreadable raw. */
function smooth(series: Series[], k: number): Series[] {
  return series.map((s) => ({
    ...s,
    points: s.points.map(([x], i) => {
      const window = s.points.slice(Math.max(0, i - k), i + k + 1);
      return [x, window.reduce((a, p) => a + p[1], 0) / window.length] as const;
    }),
  }));
}
