// Gathers calls that arrive within a short window and runs them as one batch, so many callers
// cost the database one statement instead of one each. The server gathers the workers'
// heartbeats with it (main.ts); a held heartbeat then waits in cancel-or-drain.ts.
export class MicroBatcher<In, Out> {
  private pending: { input: In; resolve: (out: Out) => void; reject: (err: unknown) => void }[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private run: (inputs: In[]) => Promise<Out[]>,
    private lingerMs: number,
    private maxBatch = 1000,
  ) {}

  submit(input: In): Promise<Out> {
    return new Promise((resolve, reject) => {
      this.pending.push({ input, resolve, reject });
      if (this.pending.length >= this.maxBatch) this.flush();
      else this.timer ??= setTimeout(() => this.flush(), this.lingerMs);
    });
  }

  /** Runs what is pending now; also what close() calls so nobody waits on a stopped server. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.pending.splice(0);
    if (batch.length === 0) return;
    this.run(batch.map((b) => b.input)).then(
      (outs) => batch.forEach((b, i) => b.resolve(outs[i])),
      (err) => batch.forEach((b) => b.reject(err)),
    );
  }
}
