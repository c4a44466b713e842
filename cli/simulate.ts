// `skipjack simulate`: one workload through each placement model, side by side, with a verdict.
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { PRESETS, preset, type PresetOptions } from '../sim/presets.js';
import { loadTrace, MODELS, simulate, type ModelName } from '../sim/simulate.js';
import { table, verdict } from '../sim/report/table.js';
import { writeReport } from '../sim/report/write.js';
import { workloadSchema, type Workload } from '../sim/workload.js';

export interface SimulateOptions extends PresetOptions {
  workload: string;
  models: ModelName[];
  json?: boolean;
  /** A directory for sim-report.html, or the .html file itself. */
  report?: string;
  /** The command line, shown in the report. */
  command?: string;
}

function load(o: SimulateOptions): Workload {
  if (Object.hasOwn(PRESETS, o.workload)) return preset(o.workload, o);
  const parsed = workloadSchema.safeParse(JSON.parse(readFileSync(o.workload, 'utf8')));
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw new Error(`${o.workload}: ${i.path.join('.') || '(top)'}: ${i.message}`);
  }
  const w = parsed.data;
  return { ...w, seed: o.seed ?? w.seed, maxJobs: o.jobs ?? w.maxJobs };
}

export function runSimulation(o: SimulateOptions): number {
  let w: Workload;
  try {
    w = load(o);
  } catch (err) {
    process.stderr.write(`skipjack simulate: ${(err as Error).message}\n`);
    return 2;
  }
  const baseDir = Object.hasOwn(PRESETS, o.workload) ? '.' : dirname(o.workload);
  const trace = loadTrace(w, baseDir);
  const results = o.models.map((m) => {
    const started = performance.now();
    let shown = 0;
    const r = simulate(w, m, {
      trace,
      progress: (f) => {
        if (performance.now() - started < 2000 || f - shown < 0.1) return;
        shown = f;
        process.stderr.write(`${m}: ${Math.round(f * 100)}% of arrivals simulated\n`);
      },
    });
    return r;
  });
  if (o.report) {
    const file = writeReport(o.report, results, {
      command: o.command ?? `skipjack simulate --workload ${o.workload}`,
      workload: o.workload,
      seed: w.seed,
    });
    process.stderr.write(`report written to ${file}\n`);
  }
  if (o.json) {
    process.stdout.write(JSON.stringify(Object.fromEntries(results.map((r) => [r.model, r])), null, 2) + '\n');
  } else process.stdout.write(table(results) + '\n' + verdict(results));
  return results.some((r) => r.violations.constraint + r.violations.capacity > 0) ? 1 : 0;
}

export { MODELS };
