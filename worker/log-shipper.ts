// Ships one run's output to the server in order. Chunks wait in memory until the server
// acknowledges them, so an outage delays output but loses none; the supervisor's output cap
// bounds that memory. The server stores by byte offset, so a resent chunk is stored once.
import { ApiRequestError, UnreachableError, type SkipjackClient } from '../protocol/client.js';
import { Backoff, sleep } from './backoff.js';
import { coalesceChunks, type OutputChunk } from './output.js';

const MAX_REQUEST_BYTES = 1024 * 1024;

export class LogShipper {
  private pending: OutputChunk[] = [];
  private acked = 0;
  private flushing: Promise<void> | null = null;
  /** Set when shipping stops for good: the lease is lost, or output can no longer be delivered whole. */
  private lost = false;
  private wake: (() => void) | null = null;

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
    await new Promise<void>((r) => { this.wake = r; setTimeout(r, this.lingerMs); });
    this.wake = null;
    const backoff = new Backoff();
    while (this.pending.length > 0 && !this.lost) {
      const batch = this.takeBatch();
      try {
        const { end } = await this.client.appendLogs(this.jobId, this.leaseToken, batch.map(toWire));
        this.ack(end);
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
      this.onRefused(new Error(`output from byte ${expected} to ${this.pending[0].offset} was lost; the rest of this run's output is dropped`));
      this.pending = [];
      this.lost = true;
      return true;
    }
    if (err instanceof UnreachableError || (err instanceof ApiRequestError && err.retryable)) return false;
    if (err instanceof ApiRequestError && (err.status === 409 || err.status === 404)) {
      this.lost = true;
      this.pending = [];
      this.onLeaseLost();
      return true;
    }
    // Any other refusal will not change on a retry: drop what we hold rather than spin.
    this.onRefused(err as Error);
    this.pending = [];
    return true;
  }
}

const toWire = (c: OutputChunk) => ({ offset: c.offset, stream: c.stream, data: c.data.toString('base64') });
