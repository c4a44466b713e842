// `--report DIR`: the page written to DIR/sim-report.html, or to the path itself when it ends in .html.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { SimResult } from '../simulate.js';
import { reportHtml, type ReportMeta } from './page.js';

export function reportPath(target: string): string {
  return target.endsWith('.html') ? target : join(target, 'sim-report.html');
}

export function writeReport(target: string, results: readonly SimResult[], meta: ReportMeta): string {
  const file = reportPath(target);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, reportHtml(results, meta));
  return file;
}
