// The side-by-side table and the verdict: the text output, and the rows the HTML report shows.
import type { SimResult } from '../simulate.js';

export type Row = [label: string, value: (r: SimResult) => number | string, meaning: string];

export const ROWS: Row[] = [
  ['jobs', (r) => r.jobs, 'arrivals'],
  ['completed', (r) => r.completed, 'ran to the end'],
  ['unplaceable', (r) => r.unplaceable.count, 'refused at enqueue: no live worker could ever run them'],
  ['still waiting', (r) => r.stillWaiting, 'pending when the run stopped'],
  ['lost and requeued', (r) => r.lost, "runs on failed workers, requeued at the reaper's pass"],
  ['wait mean (s)', (r) => r.wait.mean, 'arrival (or requeue) to start'],
  ['wait p50 / p95 (s)', (r) => `${r.wait.p50} / ${r.wait.p95}`, ''],
  ['wait p99 / max (s)', (r) => `${r.wait.p99} / ${r.wait.max}`, ''],
  ['placement latency mean (s)', (r) => r.placementLatency.mean, 'arrival to the decision (before wake-up and claim)'],
  ['throughput (jobs/s)', (r) => r.throughputPerSecond, 'completed / time of the last completion'],
  [
    'utilization cpu / mem / slots',
    (r) => `${r.utilization.cpu} / ${r.utilization.memoryMb} / ${r.utilization.slots}`,
    'time-averaged share in use',
  ],
  ['stranded capacity', (r) => r.strandedShare, 'share of slots free on workers no waiting job fits'],
  ['distribution score', (r) => r.distributionScore, "Diego's sd/mean of memory in use per worker: lower is more even"],
  [
    'db statements / job',
    (r) => r.dbStatementsPerJob,
    'modeled: enqueue, claims (empty too), passes, assigns, heartbeats, release',
  ],
  ['constraint violations', (r) => r.violations.constraint, 'must be 0'],
  ['capacity violations', (r) => r.violations.capacity, 'must be 0'],
];

export type TableRow = [label: string, values: string[], meaning: string];

/** Each metric's row, one value per model, then the waits of each job class. */
export function tableRows(results: SimResult[]): TableRow[] {
  const classes = [...new Set(results.flatMap((r) => Object.keys(r.waitByClass)))];
  const rows: TableRow[] = ROWS.map(([l, f, m]) => [l, results.map((r) => String(f(r))), m]);
  for (const c of classes) {
    const cell = (r: SimResult) => {
      const d = r.waitByClass[c];
      return d ? `${d.mean} / ${d.p99}` : '-';
    };
    rows.push([`  ${c}: wait mean / p99 (s)`, results.map(cell), '']);
  }
  return rows;
}

export function table(results: SimResult[]): string {
  const rows = tableRows(results);
  const width = Math.max(...rows.map(([l]) => l.length));
  const cols = results.map((r, i) => Math.max(r.model.length, ...rows.map(([, v]) => v[i]!.length)));
  const line = (l: string, v: string[], m: string) =>
    `${l.padEnd(width)}  ${v.map((x, i) => x.padStart(cols[i]!)).join('  ')}${m ? `  ${m}` : ''}`;
  const out = [
    line(
      '',
      results.map((r) => r.model),
      '',
    ),
    ...rows.map(([l, v, m]) => line(l, v, m)),
  ];
  const reasons = Object.entries(results[0]?.unplaceable.byClass ?? {});
  if (reasons.length)
    out.push('', 'unplaceable, by job class:', ...reasons.map(([c, x]) => `  ${c} (${x.count}): ${x.reason}`));
  return out.join('\n') + '\n';
}

export const VERDICT_TITLE = 'verdict (lower is better on each):';

/** Who wins each headline metric, and by how much against the runner-up. */
export function verdict(results: SimResult[]): string {
  const lines = verdictLines(results);
  return lines.length ? `${VERDICT_TITLE}\n${lines.map((l) => `- ${l}`).join('\n')}\n` : '';
}

export function verdictLines(results: SimResult[]): string[] {
  if (results.length < 2) return [];
  const metrics: [string, (r: SimResult) => number][] = [
    ['mean wait', (r) => r.wait.mean],
    ['p99 wait', (r) => r.wait.p99],
    ['stranded capacity', (r) => r.strandedShare],
    ['distribution score', (r) => r.distributionScore],
    ['db statements per job', (r) => r.dbStatementsPerJob],
  ];
  return metrics.map(([name, f]) => {
    const sorted = [...results].sort((a, b) => f(a) - f(b));
    const [best, next] = [sorted[0]!, sorted[1]!];
    if (f(best) === f(next)) return `${name}: a tie (${f(best)})`;
    const by = f(next) > 0 ? `${Math.round((1 - f(best) / f(next)) * 100)}% lower` : 'lower';
    return `${name}: ${best.model} wins, ${f(best)} against ${next.model}'s ${f(next)} (${by})`;
  });
}
