// How old each lease is when its claim is answered, so that the worker can date it (it cannot:
// a long-poll's lease may begin anywhere in its wait). Each claimed row is marked with a moment
// no later than its lease began, by this process's monotonic clock: just before the statement
// that began it was sent. The age answered is then at least the lease's true age, never less.
import { performance } from 'node:perf_hooks';
import type { ClaimRow } from '../db.js';

const marks = new WeakMap<ClaimRow, number>();

/** A moment before the statement that begins (or extends) a lease is sent. */
export const leaseClock = (): number => performance.now();

/** `at`: leaseClock() taken before the statement that began these rows' leases was sent. */
export function markLeases<T extends ClaimRow[]>(rows: T, at: number): T {
  for (const row of rows) marks.set(row, at);
  return rows;
}

/** At most how long ago the row's lease began; undefined for a row never marked. */
export function leaseAgeMs(row: ClaimRow, now = performance.now()): number | undefined {
  const at = marks.get(row);
  return at === undefined ? undefined : Math.max(0, Math.ceil(now - at));
}

/** How long since `since` (leaseClock()), rounded down: what the server held a request for. */
export const heldMs = (since: number, now = performance.now()): number => Math.max(0, Math.floor(now - since));
