// Value matching shared by the region filter, the labels filter and the affinity ranker.
import type { LabelSelector } from './types.js';

/** A wanted value is one string (equality) or a list (membership). */
export function valueMatches(actual: string | null | undefined, want: string | string[]): boolean {
  if (actual === null || actual === undefined) return false;
  return typeof want === 'string' ? actual === want : want.includes(actual);
}

/** "region ord≠mad", "region ord∉{mad,lis}", "no region (wants mad)"; null when it matches. */
export function describeMismatch(subject: string, actual: string | null, want: string | string[]): string | null {
  if (valueMatches(actual, want)) return null;
  if (actual === null)
    return `no ${subject.trim()} (wants ${typeof want === 'string' ? want : `one of ${want.join(',')}`})`;
  return typeof want === 'string' ? `${subject}${actual}≠${want}` : `${subject}${actual}∉{${want.join(',')}}`;
}

function labelOf(labels: Record<string, string>, key: string): string | undefined {
  // hasOwn: a label named "constructor" must not find Object.prototype.constructor.
  return Object.hasOwn(labels, key) ? labels[key] : undefined;
}

/** The first selector entry the labels fail, as a reason; null when all match. */
export function labelMismatch(selector: LabelSelector, labels: Record<string, string>): string | null {
  for (const [key, want] of Object.entries(selector)) {
    const actual = labelOf(labels, key);
    if (actual === undefined) return `label ${key} missing`;
    const reason = describeMismatch(`label ${key}=`, actual, want);
    if (reason) return reason;
  }
  return null;
}

export function selectorMatches(selector: LabelSelector, labels: Record<string, string>): boolean {
  return labelMismatch(selector, labels) === null;
}
