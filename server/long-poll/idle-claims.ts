// Remembers workers whose last claim found nothing, so their next long-poll need not ask the
// database again until something could have changed: a job became due or was assigned (the
// hub's wake-up count moved), or the worker asks for more than before (it freed capacity).
// 200 idle workers then cost no claim queries at all, only their batched heartbeats.
export class IdleClaims {
  private idle = new Map<string, { seq: number; max: number; at: number }>();

  /** Recheck anyway after this long, in case a wake-up was missed. */
  constructor(private recheckMs = 5 * 60_000) {}

  nothingNew(workerId: string, seq: number, max: number): boolean {
    const e = this.idle.get(workerId);
    return !!e && e.seq === seq && max <= e.max && Date.now() - e.at < this.recheckMs;
  }

  remember(workerId: string, seq: number, max: number): void {
    this.idle.set(workerId, { seq, max, at: Date.now() });
    // Workers come and go; entries past their recheck time are useless, so they go too.
    if (this.idle.size > 10_000) {
      for (const [id, e] of this.idle) if (Date.now() - e.at >= this.recheckMs) this.idle.delete(id);
    }
  }

  forget(workerId: string): void {
    this.idle.delete(workerId);
  }
}
