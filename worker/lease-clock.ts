// When a lease began or was last extended, on this worker's clock, from what the server said.
//
// The server answers with the lease's age when it answered (at least its true age) and how long
// it had the request (at most the true time). The answer's trip back took at most the round trip
// less the server's time, so the lease began no later than
//   receivedAt - (roundTrip - serverMs) - leaseAgeMs  =  sentAt + serverMs - leaseAgeMs.
// The margin is thus the request's whole network round trip (its way out is counted as nothing),
// plus the server's rounding up; clocks' rates differ by parts per million, which is nothing
// next to it. A long-poll's wait is in serverMs, so it costs nothing, unlike dating from `sentAt`.

/** Dates a lease from an answer; an older server says nothing, and the request's send time stands. */
export function leaseExtendedAt(
  sentAt: number,
  receivedAt: number,
  answer: { serverMs?: number; leaseAgeMs?: number },
  fallback = sentAt,
): number {
  const { serverMs, leaseAgeMs } = answer;
  if (typeof leaseAgeMs !== 'number' || !(leaseAgeMs >= 0)) return fallback;
  const roundTrip = Math.max(0, receivedAt - sentAt);
  const held = typeof serverMs === 'number' && serverMs >= 0 ? Math.min(serverMs, roundTrip) : 0;
  return sentAt + held - leaseAgeMs;
}

/** How long before a lease runs out a job stopped for it is SIGKILLed, at most (a tenth of the TTL if less). */
const LEASE_END_MARGIN_MS = 1000;

/** When a job must be dead by, if its lease cannot be extended: its end less a margin for a late timer. */
export function killByForLease(extendedAt: number, leaseTtlMs: number): number {
  return extendedAt + leaseTtlMs - Math.min(LEASE_END_MARGIN_MS, leaseTtlMs / 10);
}
