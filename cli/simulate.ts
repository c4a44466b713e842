// `skipjack simulate`: one workload, placed by pull and by central scheduling, side by side.
import { readFileSync } from 'node:fs';
import { simulate, type Mode, type SimResult } from '../sim/simulate.js';
import { workloadSchema } from '../sim/workload.js';

export function runSimulation(file: string, modes: Mode[], json: boolean): number {
  const parsed = workloadSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
  if (!parsed.success) {
    const i = parsed.error.issues[0];
    process.stderr.write(`${file}: ${i.path.join('.') || '(top)'}: ${i.message}\n`);
    return 2;
  }
  const results = modes.map((m) => simulate(parsed.data, m));
  process.stdout.write(json ? JSON.stringify(results, null, 2) + '\n' : table(results));
  return results.some((r) => r.violations.constraint + r.violations.capacity > 0) ? 1 : 0;
}

function table(results: SimResult[]): string {
  const rows: [string, (r: SimResult) => string | number][] = [
    ['jobs', (r) => r.jobs],
    ['completed', (r) => r.completed],
    ['unplaceable (refused at enqueue)', (r) => r.unplaceable.count],
    ['still waiting at the end', (r) => r.stillWaiting],
    ['wait p50 (s)', (r) => r.waitSeconds.p50],
    ['wait p95 (s)', (r) => r.waitSeconds.p95],
    ['wait p99 (s)', (r) => r.waitSeconds.p99],
    ['wait max (s)', (r) => r.waitSeconds.max],
    ['cpu utilization', (r) => r.cpuUtilization],
    ['cpu imbalance (sd across workers)', (r) => r.cpuImbalance],
    ['constraint violations', (r) => r.violations.constraint],
    ['capacity violations', (r) => r.violations.capacity],
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  const lines = [`${''.padEnd(width)}  ${results.map((r) => r.mode.padStart(10)).join('  ')}`];
  for (const [label, f] of rows)
    lines.push(`${label.padEnd(width)}  ${results.map((r) => String(f(r)).padStart(10)).join('  ')}`);
  const reasons = Object.entries(results[0]?.unplaceable.reasons ?? {});
  if (reasons.length) lines.push('', 'refused, by job class:', ...reasons.map(([c, why]) => `  ${c}: ${why}`));
  return lines.join('\n') + '\n';
}
