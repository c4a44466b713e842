// Line charts as inline SVG strings: linear or log-10 axes, ticks, a legend; no library, no assets.

export interface Series {
  name: string;
  color: string;
  /** An SVG dash array, so that lines lying on one another stay told apart. */
  dash?: string;
  points: readonly (readonly [number, number])[];
}

export interface Axis {
  label: string;
  /** Log 10 with values at or below `min` drawn at `min` (a wait of 0 on a log axis). */
  log?: boolean;
  min?: number;
  max?: number;
  format?: (v: number) => string;
}

export interface ChartSpec {
  id: string;
  description: string;
  x: Axis;
  y: Axis;
  series: readonly Series[];
  /** Step after each point (a CDF) instead of straight segments. */
  step?: boolean;
}

const W = 560;
const H = 300;
const M = { left: 58, right: 30, top: 30, bottom: 46 };

export const escapeXml = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** About five round ticks over [lo, hi]: steps of 1, 2 or 5 times a power of ten. */
export function niceTicks(lo: number, hi: number, count = 5): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw)!;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    out.push(Number(v.toPrecision(12)));
  return out;
}

interface Scale {
  at(v: number): number;
  ticks: number[];
}

function scale(axis: Axis, values: number[], from: number, to: number): Scale {
  if (axis.log) {
    const min = axis.min ?? 1e-3;
    const max = Math.max(axis.max ?? Math.max(...values, min * 10), min * 10);
    const [a, b] = [Math.floor(Math.log10(min)), Math.ceil(Math.log10(max))];
    const at = (v: number) => from + ((Math.log10(Math.max(v, min)) - a) / (b - a)) * (to - from);
    return { at, ticks: Array.from({ length: b - a + 1 }, (_, i) => 10 ** (a + i)) };
  }
  const lo = axis.min ?? Math.min(0, ...values);
  const hi = axis.max ?? Math.max(...values, lo + 1e-9);
  const ticks = niceTicks(lo, hi);
  const top = Math.max(hi, ticks.at(-1)!);
  return { at: (v: number) => from + ((v - lo) / (top - lo || 1)) * (to - from), ticks };
}

const num = (v: number) => (Math.abs(v) >= 1000 ? v.toLocaleString('en') : String(Number(v.toPrecision(3))));

export function lineChart(spec: ChartSpec): string {
  const xs = spec.series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = spec.series.flatMap((s) => s.points.map((p) => p[1]));
  const sx = scale(spec.x, xs, M.left, W - M.right);
  const sy = scale(spec.y, ys, H - M.bottom, M.top);
  const fx = spec.x.format ?? num;
  const fy = spec.y.format ?? num;
  const [x0, x1, y0, y1] = [M.left, W - M.right, H - M.bottom, M.top];
  const grid = [
    ...sx.ticks.map(
      (t) =>
        `<line x1="${sx.at(t)}" x2="${sx.at(t)}" y1="${y0}" y2="${y1}" class="grid"/>` +
        `<text x="${sx.at(t)}" y="${y0 + 16}" text-anchor="middle">${escapeXml(fx(t))}</text>`,
    ),
    ...sy.ticks.map(
      (t) =>
        `<line x1="${x0}" x2="${x1}" y1="${sy.at(t)}" y2="${sy.at(t)}" class="grid"/>` +
        `<text x="${x0 - 6}" y="${sy.at(t) + 4}" text-anchor="end">${escapeXml(fy(t))}</text>`,
    ),
  ];
  const lines = spec.series.map((s) => {
    const pts: string[] = [];
    s.points.forEach(([x, y], i) => {
      if (spec.step && i > 0) pts.push(`${sx.at(x).toFixed(1)},${sy.at(s.points[i - 1]![1]).toFixed(1)}`);
      pts.push(`${sx.at(x).toFixed(1)},${sy.at(y).toFixed(1)}`);
    });
    const dash = s.dash ? ` stroke-dasharray="${s.dash}"` : '';
    return `<polyline data-model="${escapeXml(s.name)}" points="${pts.join(' ')}" stroke="${s.color}"${dash}/>`;
  });
  const legend = spec.series.map(
    (s, i) =>
      `<g transform="translate(${x0 + 8 + i * 110},${M.top - 14})">` +
      `<line x1="0" x2="24" y1="-3" y2="-3" stroke="${s.color}" stroke-width="2.5"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>` +
      `<text x="30" y="0">${escapeXml(s.name)}</text></g>`,
  );
  return [
    `<svg id="${escapeXml(spec.id)}" class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${escapeXml(spec.description)}">`,
    ...grid,
    `<line x1="${x0}" x2="${x1}" y1="${y0}" y2="${y0}" class="axis"/><line x1="${x0}" x2="${x0}" y1="${y0}" y2="${y1}" class="axis"/>`,
    `<text x="${(x0 + x1) / 2}" y="${H - 8}" text-anchor="middle" class="label">${escapeXml(spec.x.label)}</text>`,
    `<text transform="translate(14,${(y0 + y1) / 2}) rotate(-90)" text-anchor="middle" class="label">${escapeXml(spec.y.label)}</text>`,
    `<g class="lines">${lines.join('')}</g>`,
    ...legend,
    '</svg>',
  ].join('\n');
}
