// Retrying calls to a server that may be away: exponential backoff with jitter, capped.

export const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve(); // its abort event is gone: it would sleep the whole time
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done);
  });

export class Backoff {
  private failures = 0;
  constructor(
    private baseMs = 100,
    private maxMs = 5000,
  ) {}

  /** The next delay: doubles per failure up to the cap, with up to half taken off at random. */
  next(): number {
    const full = Math.min(this.maxMs, this.baseMs * 2 ** this.failures++);
    return full * (1 - Math.random() / 2);
  }

  reset(): void {
    this.failures = 0;
  }
}
