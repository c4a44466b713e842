// The worker's dating of a lease from a claim's or heartbeat's answer.
import { leaseExtendedAt } from '../../worker/lease-clock.js';

test('a lease from a long-poll is dated from when it began, not from the poll sent 30 s before', () => {
  // Sent at 0, answered at 30,050: the server held it 30,000 ms, the lease is 20 ms old.
  expect(leaseExtendedAt(0, 30_050, { serverMs: 30_000, leaseAgeMs: 20 })).toBe(29_980);
});

test('never later than the lease began: the trip out counts as nothing, the way back as the whole network time', () => {
  // However the 50 ms of network split, the lease began at or after 29,980 - 0 on this clock.
  const dated = leaseExtendedAt(1000, 31_050, { serverMs: 30_000, leaseAgeMs: 20 });
  expect(dated).toBe(30_980);
  expect(dated).toBeLessThanOrEqual(31_050 - 20);
});

test('a server time longer than the round trip (clock rates) is cut to the round trip', () => {
  expect(leaseExtendedAt(0, 100, { serverMs: 500, leaseAgeMs: 10 })).toBe(90);
});

test('an older server says nothing: the send time (or the given fallback) stands', () => {
  expect(leaseExtendedAt(5, 30_000, {})).toBe(5);
  expect(leaseExtendedAt(5, 30_000, { serverMs: 29_000 }, 2)).toBe(2);
});

test('a lease older than the request (recovered leases) is dated before the send', () => {
  expect(leaseExtendedAt(10_000, 10_010, { serverMs: 5, leaseAgeMs: 4_000 })).toBe(6_005);
});
