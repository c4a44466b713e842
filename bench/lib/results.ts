// The result file of a scenario, and the table printed for it.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export type Metrics = Record<string, unknown>;

export interface ScenarioResult {
  scenario: string;
  date: string;
  quick: boolean;
  machine: { cpus: number; model: string; memGb: number; node: string; platform: string };
  postgres: { server_version: string; source: string };
  skipjack: Metrics;
  peers: Record<string, Metrics>;
  ratios: Record<string, number | null>;
  notes: string[];
}

export function machine(): ScenarioResult['machine'] {
  const c = cpus();
  return {
    cpus: c.length,
    model: c[0]?.model ?? 'unknown',
    memGb: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
  };
}

/** Skipjack over the peer. Throughput above 1 is better for Skipjack; latency below 1 is. */
export function ratio(skipjack: number | undefined, peer: number | undefined): number | null {
  if (
    skipjack === undefined ||
    peer === undefined ||
    !Number.isFinite(skipjack) ||
    !Number.isFinite(peer) ||
    peer === 0
  )
    return null;
  return Math.round((skipjack / peer) * 1000) / 1000;
}

const resultsDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'results');

export function writeResult(result: ScenarioResult): string {
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, `${result.scenario}${result.quick ? '.quick' : ''}.json`);
  writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
  return file;
}

/** A plain text table: the first row is the header. */
export function table(rows: (string | number | null | undefined)[][]): string {
  const cells = rows.map((r) =>
    r.map((c) => (c === null || c === undefined ? '-' : typeof c === 'number' ? fmt(c) : c)),
  );
  const widths = cells[0].map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(cells[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

function fmt(n: number): string {
  // A variant that measured nothing (no job within the time) shows dashes, not NaN.
  if (!Number.isFinite(n)) return '-';
  if (Number.isInteger(n)) return String(n);
  if (Math.abs(n) >= 100) return n.toFixed(0);
  if (Math.abs(n) >= 10) return n.toFixed(1);
  return n.toFixed(2);
}
