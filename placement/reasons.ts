// Why workers were rejected, aggregated in the style of the Kubernetes FitError:
// "0/12 workers fit: 9 region ord≠mad, 3 insufficient memory (need 1024, free ≤ 512)".
// Filters return plain strings and identical strings group together. Resource shortages
// carry a number that varies per worker, so their format is produced and parsed here,
// in one place; a plugin that uses formatShortage groups the same way.
import type { Verdict } from './types.js';

export interface Shortage {
  resource: string;
  need: number;
  free: number;
}

export function formatShortage({ resource, need, free }: Shortage): string {
  return `insufficient ${resource} (need ${need}, free ${free})`;
}

const SHORTAGE = /^insufficient (\S+) \(need (-?\d+(?:\.\d+)?), free (-?\d+(?:\.\d+)?)\)$/;

export function parseShortage(reason: string): Shortage | null {
  const m = SHORTAGE.exec(reason);
  return m ? { resource: m[1]!, need: Number(m[2]), free: Number(m[3]) } : null;
}

interface Group {
  count: number;
  text: string;
  frees: number[];
  shortage: Shortage | null;
}

/** Shortages group by resource and need; anything else by its exact text. */
function groupKey(reason: string, shortage: Shortage | null): string {
  return shortage ? `insufficient ${shortage.resource} (need ${shortage.need}` : reason;
}

/** A shortage group shows the best free value among its workers: "free ≤ 512" (or "free 512" if all agree). */
function render(group: Group): string {
  if (!group.shortage) return group.text;
  const best = Math.max(...group.frees);
  const free = group.frees.every((f) => f === best) ? `${best}` : `≤ ${best}`;
  return `insufficient ${group.shortage.resource} (need ${group.shortage.need}, free ${free})`;
}

function byCountThenText(a: { count: number; text: string }, b: { count: number; text: string }): number {
  if (a.count !== b.count) return b.count - a.count;
  return a.text < b.text ? -1 : a.text > b.text ? 1 : 0;
}

/** Counts the rejection reasons: "F/T workers fit: N reason, ...", most common first, then by text. */
export function summarizeUnfit(verdicts: readonly Verdict[], total: number): string {
  const groups = new Map<string, Group>();
  for (const v of verdicts) {
    if (v.fits) continue;
    const reason = v.reason || `${v.filter ?? 'unknown filter'} failed`;
    const shortage = parseShortage(reason);
    const key = groupKey(reason, shortage);
    const group = groups.get(key) ?? { count: 0, text: reason, frees: [], shortage };
    group.count += 1;
    if (shortage) group.frees.push(shortage.free);
    groups.set(key, group);
  }
  const fitting = verdicts.filter((v) => v.fits).length;
  const parts = [...groups.values()]
    .map((g) => ({ count: g.count, text: render(g) }))
    .sort(byCountThenText)
    .map((g) => `${g.count} ${g.text}`);
  const head = `${fitting}/${total} workers fit`;
  return parts.length ? `${head}: ${parts.join(', ')}` : head;
}
