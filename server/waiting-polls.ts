// The long-poll each worker has waiting in this server. A worker asks one claim at a time, so a
// newer claim from it means the caller of the older one is gone: it gave up on the answer, and
// something between (a proxy that keeps its upstream request open) hid the hang-up from us. Left
// to wait, that poll would take jobs for an answer nobody reads, and they would sit under their
// leases until those expired.
export class WaitingPoll {
  private ended = new AbortController();

  /** Aborted once a newer claim from the same worker has come. */
  get superseded(): AbortSignal {
    return this.ended.signal;
  }

  supersede(): void {
    this.ended.abort();
  }
}

export class WaitingPolls {
  private byWorker = new Map<string, WaitingPoll>();

  /** A claim from this worker has come: its older long-poll, if one waits here, is over. */
  supersede(workerId: string): void {
    this.byWorker.get(workerId)?.supersede();
    this.byWorker.delete(workerId);
  }

  /** Call after `supersede`, for a claim that will wait; `end` it when it is answered. */
  begin(workerId: string): WaitingPoll {
    const poll = new WaitingPoll();
    this.byWorker.set(workerId, poll);
    return poll;
  }

  end(workerId: string, poll: WaitingPoll): void {
    if (this.byWorker.get(workerId) === poll) this.byWorker.delete(workerId);
  }
}
