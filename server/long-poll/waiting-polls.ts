// The long-poll each worker has waiting in this server. A worker asks one claim at a time, so a
// newer claim from it means the caller of the older one is gone: it gave up on the answer, and
// something between (a proxy that keeps its upstream request open) hid the hang-up from us. Left
// to wait, that poll would take jobs for an answer nobody reads, and they would sit under their
// leases until those expired.
export class WaitingPolls {
  private byWorker = new Map<string, AbortController>();

  /** A claim from this worker has come: its older long-poll, if one waits here, is over. */
  supersede(workerId: string): void {
    this.byWorker.get(workerId)?.abort();
    this.byWorker.delete(workerId);
  }

  /**
   * Call after `supersede`, for a claim that will wait: the signal aborts once a newer claim from
   * the same worker comes. `end` it when the claim is answered.
   */
  begin(workerId: string): AbortSignal {
    const poll = new AbortController();
    this.byWorker.set(workerId, poll);
    return poll.signal;
  }

  end(workerId: string, superseded: AbortSignal): void {
    if (this.byWorker.get(workerId)?.signal === superseded) this.byWorker.delete(workerId);
  }
}
