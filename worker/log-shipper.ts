// Ships one run's output to the server in order. Chunks wait in memory until the server
// acknowledges them, so an outage delays output but loses none; the supervisor's output cap
// bounds that memory. The server stores by byte offset, so a resent chunk is stored once.
import { ApiRequestError, refusedForGood, UnreachableError, type SkipjackClient } from '../protocol/client.js';
import { Backoff, sleep } from './backoff.js';
import { coalesceChunks, type OutputChunk } from './output.js';

const MAX_REQUEST_BYTES = 1024 * 1024;
/**
 * Answers in a row that are not the API's (a proxy's page, a body cut off) before the output is
 * given up: the job's release waits for its output, so this cannot go on for ever as an outage can.
 */
const MAX_GARBLED_ANSWERS = 8;

export class LogShipper {
  private pending: OutputChunk[] = [];
  private acked = 0;
  private flushing: Promise<void> | null = null;
  /** Set when shipping stops for good: the lease is lost, or output can no longer be delivered whole. */
  private lost = false;
  private wake: (() => void) | null = null;
  private garbledInARow = 0;

  constructor(
    private client: SkipjackClient,
    private jobId: number,
    private leaseToken: string,
    private onLeaseLost: () => void,
    private onRefused: (err: Error) => void,
    private lingerMs = 50,
  ) {}

  push(chunk: OutputChunk): void {
    if (this.lost) return;
    this.pending.push(chunk);
    this.flushing ??= this.drain();
  }

  /** The lease is gone: what is not stored yet never will be, so stop trying (a flush ends). */
  abandon(): void {
    this.lost = true;
    this.pending = [];
    this.wake?.();
  }

  /** Resolves once every chunk pushed so far is stored (or the lease is lost). */
  async flush(): Promise<void> {
    this.wake?.();
    while (this.flushing) await this.flushing;
  }

  // A short linger lets a burst of small writes go up as one request.
  private async drain(): Promise<void> {
    await new Promise<void>((r) => {
      this.wake = r;
      setTimeout(r, this.lingerMs);
    });
    this.wake = null;
    const backoff = new Backoff();
    while (this.pending.length > 0 && !this.lost) {
      const batch = this.takeBatch();
      try {
        const { end } = await this.client.appendLogs(this.jobId, this.leaseToken, batch.map(toWire));
        this.ack(end);
        this.garbledInARow = 0;
        backoff.reset();
      } catch (err) {
        if (!this.handleError(err)) await sleep(backoff.next());
      }
    }
    this.flushing = null;
  }

  private takeBatch(): OutputChunk[] {
    const batch: OutputChunk[] = [];
    let bytes = 0;
    for (const c of this.pending) {
      if (batch.length > 0 && bytes + c.data.length > MAX_REQUEST_BYTES) break;
      batch.push(c);
      bytes += c.data.length;
    }
    return coalesceChunks(batch, MAX_REQUEST_BYTES);
  }

  private ack(end: number) {
    this.acked = Math.max(this.acked, end);
    this.pending = this.pending.filter((c) => c.offset + c.data.length > this.acked);
  }

  /** True when the error was dealt with and the loop may go on at once. */
  private handleError(err: unknown): boolean {
    if (err instanceof ApiRequestError && err.code === 'log_gap') {
      const expected = (err.body as { expectedOffset?: number }).expectedOffset ?? 0;
      this.ack(expected);
      if (this.pending.length === 0 || this.pending[0].offset <= expected) return true;
      // The bytes the server is missing are gone from here too: no retry can fill the gap.
      this.lost = true;
      return this.drop(
        new Error(
          `output from byte ${expected} to ${this.pending[0].offset} was lost; the rest of this run's output is dropped`,
        ),
      );
    }
    if (refusedForGood(err)) {
      if (err.status === 409 || err.status === 404) {
        this.lost = true;
        this.pending = [];
        this.onLeaseLost();
        return true;
      }
      // Any other refusal will not change on a retry: drop what we hold rather than spin.
      return this.drop(err);
    }
    // An outage or the server's trouble (5xx, 429): retried as long as it lasts, as releases are.
    if (err instanceof UnreachableError || err instanceof ApiRequestError) return false;
    // An answer that is not the API's (NotTheApiError: a proxy's page, a body cut off): the chunks
    // may or may not be stored, and sent again they are stored once (by offset). Worth a few more tries.
    if (++this.garbledInARow < MAX_GARBLED_ANSWERS) return false;
    return this.drop(
      new Error(
        `${MAX_GARBLED_ANSWERS} answers in a row were not the server's (last: ${(err as Error).message}); this run's unsent output is dropped`,
      ),
    );
  }

  private drop(err: Error): true {
    this.onRefused(err);
    this.pending = [];
    return true;
  }
}

const toWire = (c: OutputChunk) => ({ offset: c.offset, stream: c.stream, data: c.data.toString('base64') });
