// The report as one HTML page: charts inline as SVG, styles inline, no script, nothing fetched.
import type { SimResult } from '../simulate.js';
import { charts } from './charts.js';
import { escapeXml as esc } from './svg.js';
import { tableRows, VERDICT_TITLE, verdictLines } from './table.js';

export interface ReportMeta {
  /** The command line that made the report, shown so a reader can run it again. */
  command: string;
  workload: string;
  seed?: number;
}

const STYLE = `
body { font: 14px/1.45 system-ui, sans-serif; color: #1a1a1a; margin: 24px auto; max-width: 1180px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; } h3 { font-size: 15px; margin: 0 0 2px; }
code { background: #f2f2f2; padding: 1px 4px; border-radius: 3px; }
.grid-2 { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 20px 24px; }
figure { margin: 0; } figcaption { color: #555; font-size: 12.5px; max-width: 560px; min-height: 2.9em; margin-bottom: 4px; }
svg.chart { background: #fff; border: 1px solid #ddd; border-radius: 4px; }
svg.chart text { font-size: 11px; fill: #333; } svg.chart text.label { font-size: 12px; fill: #111; }
svg.chart .grid { stroke: #eee; } svg.chart .axis { stroke: #888; }
svg.chart polyline { fill: none; stroke-width: 2; stroke-linejoin: round; stroke-opacity: 0.9; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: right; vertical-align: top; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; white-space: pre; }
td.meaning { white-space: normal; min-width: 200px; text-align: left; color: #555; font-size: 12.5px; }
tr.class td { color: #333; background: #fafafa; }
ul.verdict li { margin: 2px 0; }
`;

function resultsTable(results: readonly SimResult[]): string {
  const head = `<tr><th>metric</th>${results.map((r) => `<th>${esc(r.model)}</th>`).join('')}<th></th></tr>`;
  const rows = tableRows([...results]).map(([label, values, meaning]) => {
    const cls = label.startsWith('  ') ? ' class="class"' : '';
    const cells = values.map((v) => `<td>${esc(v)}</td>`).join('');
    return `<tr${cls}><td>${esc(label)}</td>${cells}<td class="meaning">${esc(meaning)}</td></tr>`;
  });
  return `<table id="results">${head}${rows.join('')}</table>`;
}

function unplaceable(results: readonly SimResult[]): string {
  const reasons = Object.entries(results[0]?.unplaceable.byClass ?? {});
  if (!reasons.length) return '';
  const items = reasons.map(([c, x]) => `<li><code>${esc(c)}</code> (${x.count}): ${esc(x.reason)}</li>`);
  return `<h3>Unplaceable, by job class</h3><ul>${items.join('')}</ul>`;
}

export function reportHtml(results: readonly SimResult[], meta: ReportMeta): string {
  const figures = charts(results).map(
    (c) => `<figure><h3>${esc(c.title)}</h3><figcaption>${esc(c.note)}</figcaption>${c.svg}</figure>`,
  );
  const verdict = verdictLines([...results]);
  const seed = meta.seed === undefined ? '' : `, seed ${meta.seed}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Skipjack simulation: ${esc(meta.workload)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>Skipjack simulation: ${esc(meta.workload)}</h1>
<p>Models ${results.map((r) => `<code>${esc(r.model)}</code>`).join(', ')} on the same arrivals${esc(seed)}, in virtual time. Made by <code>${esc(meta.command)}</code>.</p>
${verdict.length ? `<h2>${esc(VERDICT_TITLE.replace(/:$/, ''))}</h2><ul class="verdict">${verdict.map((l) => `<li>${esc(l)}</li>`).join('')}</ul>` : ''}
<h2>Charts</h2>
<div class="grid-2">
${figures.join('\n')}
</div>
<h2>Side by side</h2>
${resultsTable(results)}
${unplaceable(results)}
</body>
</html>
`;
}
