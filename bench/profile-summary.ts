// Summarizes .cpuprofile files: self time by function and by package/file, top N.
//   node --import tsx bench/profile-summary.ts FILE.cpuprofile [--top 25]
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const files = process.argv.slice(2).filter((a) => !a.startsWith('--') && !/^\d+$/.test(a));
const topIdx = process.argv.indexOf('--top');
const top = topIdx >= 0 ? Number(process.argv[topIdx + 1]) : 25;

function area(url: string): string {
  if (!url) return '(native/vm)';
  const m = url.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
  if (m) return m[1];
  if (url.startsWith('node:')) return url;
  const r = url.match(/\/work\/main\/(.*)$/);
  return r ? r[1] : url;
}

for (const file of files) {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const fn = new Map<string, number>();
  const ar = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const f = `${n.callFrame.functionName || '(anon)'} ${area(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
    fn.set(f, (fn.get(f) ?? 0) + us);
    const a =
      n.callFrame.functionName === '(idle)'
        ? '(idle)'
        : n.callFrame.functionName === '(garbage collector)'
          ? '(gc)'
          : area(n.callFrame.url);
    ar.set(a, (ar.get(a) ?? 0) + us);
  }
  const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)}%`;
  process.stdout.write(`\n${file}: ${(total / 1e6).toFixed(2)} s sampled\n-- by area --\n`);
  for (const [k, v] of [...ar].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${pct(v)}  ${k}\n`);
  process.stdout.write('-- by function (self) --\n');
  for (const [k, v] of [...fn].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${pct(v)}  ${k}\n`);
}
