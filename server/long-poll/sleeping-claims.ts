// Long-polls asleep in this server process, so that an enqueue can hand its new jobs straight to
// one: the insert and that worker's claim commit together. On its way to a worker that waits for
// it, the job then waits neither for the NOTIFY nor for a second transaction and its WAL flush.
import type { ClaimRow } from '../db.js';
import { leaseClock, markLeases } from '../store/lease-age.js';

/** The reason a taken claim's long-poll is woken with: abort() alone would build a DOMException, stack and all. */
const TAKEN = 'taken by an enqueue';

export class SleepingClaim {
  /** Set once an enqueue has taken this claim: settles with what it claimed for the worker. */
  handed: Promise<ClaimRow[]> | null = null;
  private waking = new AbortController();

  constructor(
    readonly workerId: string,
    readonly max: number,
  ) {}

  /** Aborted when an enqueue takes this claim, so the long-poll wakes to collect the jobs. */
  get woken(): AbortSignal {
    return this.waking.signal;
  }

  /** Marks the claim taken; the caller must settle it with `deliver`. */
  take(): (jobs: ClaimRow[]) => void {
    let deliver!: (jobs: ClaimRow[]) => void;
    // Taken before the enqueue's statement is sent: its leases are younger than this.
    const before = leaseClock();
    this.handed = new Promise((resolve) => (deliver = (jobs) => resolve(markLeases(jobs, before))));
    this.waking.abort(TAKEN);
    return deliver;
  }
}

export class SleepingClaims {
  // A Set keeps insertion order: the longest asleep comes first.
  private asleep = new Set<SleepingClaim>();

  get size(): number {
    return this.asleep.size;
  }

  sleep(workerId: string, max: number): SleepingClaim {
    const claim = new SleepingClaim(workerId, max);
    this.asleep.add(claim);
    return claim;
  }

  wake(claim: SleepingClaim): void {
    this.asleep.delete(claim);
  }

  /** The longest-asleep claim `accepts` takes, removed so that no other enqueue takes it too. */
  take(accepts: (workerId: string) => boolean): { claim: SleepingClaim; deliver: (jobs: ClaimRow[]) => void } | null {
    for (const claim of this.asleep) {
      if (!accepts(claim.workerId)) continue;
      this.asleep.delete(claim);
      return { claim, deliver: claim.take() };
    }
    return null;
  }
}
