// Counts and times every statement sent through node-postgres in this process (the in-process
// server's included), grouped by the statement's opening text. For breakdowns, not for timing claims.
import pg from 'pg';

interface Stat {
  count: number;
  totalMs: number;
}

const stats = new Map<string, Stat>();
let installed = false;
let enabled = false;

function key(q: unknown): string {
  const text = typeof q === 'string' ? q : ((q as { text?: string } | null)?.text ?? '(non-text query)');
  return text.replace(/\s+/g, ' ').trim().slice(0, 90);
}

export function installQueryStats(): void {
  if (installed) return;
  installed = true;
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const result = original.apply(this, args);
    if (!enabled || !(result instanceof Promise)) return result;
    const k = key(args[0]);
    const t0 = performance.now();
    const done = () => {
      const s = stats.get(k) ?? { count: 0, totalMs: 0 };
      s.count++;
      s.totalMs += performance.now() - t0;
      stats.set(k, s);
    };
    result.then(done, done);
    return result;
  };
}

export function startQueryStats(): void {
  installQueryStats();
  stats.clear();
  enabled = true;
}

export function stopQueryStats(): { statement: string; count: number; totalMs: number; meanMs: number }[] {
  enabled = false;
  return [...stats]
    .map(([statement, s]) => ({
      statement,
      count: s.count,
      totalMs: Math.round(s.totalMs),
      meanMs: Math.round((s.totalMs / s.count) * 100) / 100,
    }))
    .sort((a, b) => b.totalMs - a.totalMs);
}

/** Statement count only (no timing), for the idle scenario. */
export function queryCount(): number {
  let n = 0;
  for (const s of stats.values()) n += s.count;
  return n;
}
